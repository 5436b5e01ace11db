"""File-system layer: checksums, atomic replacement, directory fsync.

Everything above this layer writes files through these helpers, so that durability
rules (write, fsync, rename, fsync the directory) live in one place.
"""
