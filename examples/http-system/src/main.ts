// Command line of the reference server:
//   node dist/src/main.js [--host 127.0.0.1] [--port 8077] [--prefix /v1] [--leaky]
// The bearer token, if any, comes from the environment (REFERENCE_SERVER_TOKEN), never an argument.
// Prints one line, `listening on http://HOST:PORT/PREFIX`, once it takes connections (port 0: any free port).

import { AddressInfo } from "node:net";

import { createServer } from "./server";

interface Args {
  host: string;
  port: number;
  prefix: string;
  leaky: boolean;
}

export function parseArgs(argv: string[]): Args {
  const args: Args = { host: "127.0.0.1", port: 8077, prefix: "", leaky: false };
  for (let i = 0; i < argv.length; i++) {
    const option = argv[i];
    const value = (): string => {
      const next = argv[++i];
      if (next === undefined) {
        throw new Error(`${option} needs a value`);
      }
      return next;
    };
    if (option === "--host") {
      args.host = value();
    } else if (option === "--port") {
      args.port = Number(value());
      if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) {
        throw new Error(`--port: expected a port number, got ${argv[i]}`);
      }
    } else if (option === "--prefix") {
      args.prefix = value();
      if (!args.prefix.startsWith("/")) {
        throw new Error(`--prefix: expected a path starting with /, got ${args.prefix}`);
      }
    } else if (option === "--leaky") {
      args.leaky = true;
    } else {
      throw new Error(`unknown option ${option}`);
    }
  }
  return args;
}

function main(): void {
  let args: Args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`error: ${(error as Error).message}\n`);
    process.exit(2);
  }
  const server = createServer({ prefix: args.prefix, leaky: args.leaky,
                                token: process.env.REFERENCE_SERVER_TOKEN || undefined });
  server.listen(args.port, args.host, () => {
    const address = server.address() as AddressInfo;
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
    process.stdout.write(`listening on http://${host}:${address.port}${args.prefix.replace(/\/+$/, "")}\n`);
  });
  const stop = (): void => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (require.main === module) {
  main();
}
