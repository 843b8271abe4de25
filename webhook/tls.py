"""TLS ≥ 1.2 with certificate rotation and no restart.

The listening context never changes; its SNI callback (which OpenSSL runs for every
ClientHello, with or without a server name) checks the files' mtimes (the serving certificate,
its key and the `--client-ca` bundle) and hands the handshake a freshly loaded context when
they changed. A load that fails (the key written
after the certificate, a half-written file) keeps the previous context, so a rotation in
progress never fails a handshake; the next handshake tries again.
"""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger("overlay-guard.tls")

Stamp = tuple[tuple[int, int], ...]


def _stamp(*paths: Path) -> Stamp:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((0, -1))
    return tuple(out)


class ReloadingContext:
    def __init__(self, cert: Path, key: Path, client_ca: Path | None = None) -> None:
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self._files = (cert, key) if client_ca is None else (cert, key, client_ca)
        self._stamp = _stamp(*self._files)
        self._failed: Stamp | None = None
        self.reloads = 0
        # Raises at start: a webhook without a usable certificate must not come up.
        self._current = self._load()
        self.context = self._load()
        self.context.sni_callback = self._on_hello

    def _load(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(self.cert), str(self.key))
        if self.client_ca is not None:
            # The API server presents its client certificate (kubeconfig of its admission
            # configuration); anything else is refused in the handshake.
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=str(self.client_ca))
        return ctx

    def refresh(self) -> bool:
        """Reload if the files changed; True when a new certificate is now in use."""
        stamp = _stamp(*self._files)
        if stamp == self._stamp or stamp == self._failed:
            return False
        try:
            fresh = self._load()
        except (OSError, ssl.SSLError, ValueError) as err:
            if self._failed is None or self._failed != stamp:
                log.warning("certificate or client-CA files changed but do not load yet; keeping the previous ones",
                            extra={"fields": {"error": str(err)[:300]}})
            self._failed = stamp
            return False
        self._current, self._stamp, self._failed = fresh, stamp, None
        self.reloads += 1
        log.info("certificate reloaded", extra={"fields": {
            "cert": str(self.cert), "clientCA": str(self.client_ca or ""), "reloads": self.reloads}})
        return True

    def current(self) -> ssl.SSLContext:
        return self._current

    def _on_hello(self, conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                  ctx: ssl.SSLContext) -> int | None:
        try:
            self.refresh()
            conn.context = self._current
        except Exception:  # an exception here would abort the handshake with an alert
            log.exception("certificate reload check failed")
        return None
