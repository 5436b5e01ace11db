"""Owns binding statements to storage tables: names, scopes, projection and predicate
pushdown, and the queries behind DML.

Modules: ``names`` (SQL names to storage table names), ``plan`` (``plan_query``: each
table reference bound to a scan), ``pushdown`` (conditions to storage predicates),
``dml`` (INSERT, UPSERT, UPDATE and DELETE as a query plus a write).
"""
