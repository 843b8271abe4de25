"""overlay-webhook: the admission webhook, a thin aiohttp adapter over the simulation core."""
