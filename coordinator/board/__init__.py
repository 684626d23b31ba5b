"""`memfarm board`: the static folder of many runs side by side; `build` reads, pairs and writes it."""
