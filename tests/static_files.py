"""WhiteNoise as the product runs it, with its scan of the static files done once a process (config/test_settings.py
puts it in the place of `whitenoise.middleware.WhiteNoiseMiddleware`).

Each test's client builds the middleware chain anew, and WhiteNoise's constructor stats and indexes every
static file (STATIC_ROOT and, with WHITENOISE_USE_FINDERS, every finder's): 25-35 ms of CPU a client, about
2 s of each test of tests/security/test_lockout.py (80 clients). The scan's result (url -> StaticFile, which
requests only read) is kept per root and prefix; how a request is answered is WhiteNoise's own code."""

from whitenoise.middleware import WhiteNoiseMiddleware

_SCANS: dict[tuple, dict] = {}


class WhiteNoiseScannedOnce(WhiteNoiseMiddleware):
    def _scanned(self, key: tuple, scan) -> None:
        if key not in _SCANS:
            before = dict(self.files)
            scan()
            _SCANS[key] = {url: f for url, f in self.files.items() if before.get(url) is not f}
        self.files.update(_SCANS[key])

    def add_files(self, root, prefix=None):
        if self.autorefresh:
            return super().add_files(root, prefix)
        self._scanned(
            ("root", str(root), prefix),
            lambda: super(WhiteNoiseScannedOnce, self).add_files(root, prefix),
        )

    def add_files_from_finders(self):
        self._scanned(
            ("finders", self.static_prefix),
            lambda: super(WhiteNoiseScannedOnce, self).add_files_from_finders(),
        )
