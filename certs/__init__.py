"""CA and serving-certificate generation, and the webhook configurations that carry the caBundle."""
