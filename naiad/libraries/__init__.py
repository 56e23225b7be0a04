"""Libraries from the papers, built on the public API only (never inside the runtime)."""
