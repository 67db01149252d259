"""Integrations with engines teams already run; each submodule needs its own extra.

* :mod:`lovia.integrations.celery`: background runs on Celery (``pip install 'lovia[celery]'``).

Nothing here is imported by ``import lovia``; the core never imports this package.
"""
