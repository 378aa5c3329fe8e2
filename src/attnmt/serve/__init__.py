"""``serve.py``: a local translation page with interactive attention maps and a JSON API
(``attnmt[serve]``: FastAPI and uvicorn). See docs/serve.md."""
