"""Operational state: the catalog (jobs, documents, pages, structure, audit log), query traces and
API keys, on SQLite files under ``data_dir`` (the embedded default) or PostgreSQL (the cluster
profile).

- :mod:`pagesight.store.tables`: every table, defined once (SQLAlchemy Core), for both databases;
- :mod:`pagesight.store.schema` and ``pagesight/store/migrations``: one Alembic history for both; a
  SQLite file
  is brought to the head revision when it is opened (one written before the history existed
  included), PostgreSQL by ``pagesight db upgrade`` (or ``database.migrate_on_start``);
- :mod:`pagesight.store.database`: what a repository runs its statements on, whichever the database;
  :mod:`pagesight.store.sqlite` and :mod:`pagesight.store.postgres` (the process's pool) implement
  it;
- repositories, their statements written once for both databases in a shared base:
  :mod:`pagesight.store.catalog` (SQLite; :mod:`pagesight.store.catalog_postgres`; both
  :mod:`pagesight.store.catalog_base`), :mod:`pagesight.store.traces`
  (:mod:`pagesight.store.traces_postgres`,
  :mod:`pagesight.store.traces_base`), and the key stores :mod:`pagesight.store.key_stores`
  (environment, keys file; :mod:`pagesight.store.key_store_postgres`).

The store imports only :mod:`pagesight.core` (and its libraries); psycopg only when a
``database_url`` is set, so an embedded installation never loads it.
"""
