"""The TLS certificates of a `--tls` cluster: a private CA, the server's certificate, and a client
certificate per machine, made and renewed with openssl.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from adapters.errors import MemfarmError

#: Days a server or client certificate is valid; `memfarm cluster renew-certs` issues new ones from the CA.
CERTIFICATE_DAYS = 365
#: Days the cluster's CA is valid. `renew-certs` makes a new CA when the old one would expire before the
#: certificates it signs (fewer than CERTIFICATE_DAYS left).
CA_DAYS = 5 * 365
#: The certificate files of a --tls cluster, under its state directory's `tls/`.
TLS_FILES = ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")


def make_certificates(directory: Path, address: str = "127.0.0.1", *, also: Sequence[str] = ()) -> dict[str, str]:
    """A private CA, a server certificate for 127.0.0.1 / localhost (and `address`, the interface Redis
    listens on for other machines, and the addresses in `also`) and a client certificate, made with
    openssl into `directory` (keys 0600). Returns their paths."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    make_ca(directory)
    addresses = dict.fromkeys(["127.0.0.1", address, *also])
    (directory / "server.ext").write_text("subjectAltName=" + ",".join(["DNS:localhost", *(f"IP:{a}" for a in addresses)])
                                          + "\n")
    issue_certificate(directory, directory, "server", "memoria-farm server", extension="server.ext")
    issue_certificate(directory, directory, "client", "memoria-farm client")
    return {name: str((directory / name).resolve()) for name in TLS_FILES}


def make_ca(directory: Path) -> None:
    """A new private CA (`ca.key`, `ca.crt`, valid CA_DAYS) in `directory`, replacing any there."""
    _openssl(directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key.new", "-out", "ca.crt.new",
             "-days", str(CA_DAYS), "-subj", "/CN=memoria-farm cluster CA")
    for name in ("ca.key", "ca.crt"):
        os.replace(directory / f"{name}.new", directory / name)


def issue_certificate(ca_dir: Path, directory: Path, name: str, subject: str, extension: str | None = None) -> None:
    """`directory/name.key` and `name.crt`, valid CERTIFICATE_DAYS, signed by the CA in `ca_dir`, each replacing
    the old file in one
    rename (a client that reconnects reads either the old pair or the new one, never half of one)."""
    _openssl(directory, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key.new", "-out", f"{name}.csr",
             "-subj", f"/CN={subject}")
    ca = ca_dir.resolve()
    _openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", str(ca / "ca.crt"), "-CAkey", str(ca / "ca.key"),
             "-CAserial", str(ca / "ca.srl"), "-CAcreateserial", "-out", f"{name}.crt.new", "-days", str(CERTIFICATE_DAYS),
             *(["-extfile", extension] if extension else []))
    (directory / f"{name}.csr").unlink()
    for suffix in ("key", "crt"):  # the certificate last: a key and an older certificate never meet for long
        os.replace(directory / f"{name}.{suffix}.new", directory / f"{name}.{suffix}")


def certificate_expiry(path: Path) -> dict:
    """When the certificate in `path` expires (`not_after`, UTC, ISO 8601) and its serial number."""
    import ssl
    from datetime import datetime, timezone

    out = _openssl(Path(path).parent, "x509", "-noout", "-enddate", "-serial", "-in", Path(path).name)
    fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    seconds = ssl.cert_time_to_seconds(fields["notAfter"])
    return {"not_after": datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds"),
            "serial": fields["serial"].lower()}


def _openssl(directory: Path, *args: str) -> str:
    if shutil.which("openssl") is None:
        raise MemfarmError("--tls needs openssl on PATH (apt-get install openssl)")
    old_umask = os.umask(0o077)  # keys are their owner's from their first byte
    try:
        proc = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
    finally:
        os.umask(old_umask)
    if proc.returncode != 0:
        raise MemfarmError(f"openssl {args[0]} in {directory} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def tls_environment(certificates: dict[str, str]) -> dict[str, str]:
    """What a client of a --tls cluster needs in its environment (coordinator, workers, Flower)."""
    return {"MEMFARM_TLS_CA": certificates["ca.crt"], "MEMFARM_TLS_CERT": certificates["client.crt"],
            "MEMFARM_TLS_KEY": certificates["client.key"]}
