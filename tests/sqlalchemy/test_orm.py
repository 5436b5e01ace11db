"""ORM basics on kudusql: a declarative model, Session add/commit/query/filter/update/
delete, relationships by foreign key (left out of the DDL), and what a rollback means."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    __table_args__ = {"kudusql_partition_by": "HASH (id) PARTITIONS 2"}  # noqa: RUF012

    id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(40), index=True)
    Email: Mapped[str | None]
    active: Mapped[bool] = mapped_column(default=True)
    addresses: Mapped[list[Address]] = relationship(back_populates="user")


class Address(Base):
    __tablename__ = "addresses"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id"))
    street: Mapped[str]
    user: Mapped[User] = relationship(back_populates="addresses")


@pytest.fixture
def session(engine: sa.Engine) -> Iterator[Session]:
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        s.add_all(
            [
                User(id=1, name="ann", Email="ann@x"),
                User(id=2, name="bob", active=False),
                User(id=3, name="cy"),
            ]
        )
        s.add_all(
            [Address(id=10, user_id=1, street="Main"), Address(id=11, user_id=1, street="Elm")]
        )
        s.commit()
    with Session(engine) as s:
        yield s


def test_add_and_query(session: Session) -> None:
    u = session.get(User, 1)
    assert u is not None and (u.name, u.Email, u.active) == ("ann", "ann@x", True)
    assert sorted(a.street for a in u.addresses) == ["Elm", "Main"]
    names = session.scalars(sa.select(User.name).where(User.active).order_by(User.id)).all()
    assert names == ["ann", "cy"]
    assert [x.id for x in session.query(User).filter(User.name.like("%y")).all()] == [3]
    assert session.query(User).filter_by(active=False).one().name == "bob"
    assert session.query(User).order_by(User.id.desc()).limit(1).one().id == 3
    rows = session.execute(
        sa.select(User.name, sa.func.count(Address.id))
        .join(Address, isouter=True)
        .group_by(User.name)
        .order_by(User.name)
    ).all()
    assert rows == [("ann", 2), ("bob", 0), ("cy", 0)]


def test_update_and_delete(session: Session, engine: sa.Engine) -> None:
    u = session.get(User, 2)
    assert u is not None
    u.name = "robert"
    u.Email = "r@x"
    session.commit()
    session.execute(sa.update(User).where(User.id == 3).values(active=False))
    session.query(User).filter(User.id == 1).update({User.name: User.name + "!"})
    session.delete(session.get(Address, 11))
    session.commit()
    session.execute(sa.delete(Address).where(Address.street == "Main"))
    session.delete(session.get(User, 3))
    session.commit()
    with Session(engine) as fresh:
        got = fresh.execute(sa.select(User.id, User.name, User.Email, User.active)).all()
        assert sorted(got) == [(1, "ann!", "ann@x", True), (2, "robert", "r@x", False)]
        assert fresh.scalars(sa.select(Address)).all() == []


def test_duplicate_key_raises_integrity_error(session: Session) -> None:
    session.add(User(id=1, name="again"))
    with pytest.raises(exc.IntegrityError, match="key already present"):
        session.commit()
    session.rollback()
    assert session.get(User, 1).name == "ann"  # type: ignore[union-attr]


def test_rollback_keeps_flushed_writes(session: Session, engine: sa.Engine) -> None:
    """Autocommit: a flushed INSERT is committed when it returns; rollback() only resets
    the Session (docs/SQLALCHEMY.md)."""
    session.add(User(id=9, name="flushed"))
    session.flush()
    session.rollback()
    with Session(engine) as fresh:
        assert fresh.get(User, 9) is not None


def test_begin_nested_is_refused(session: Session) -> None:
    session.begin_nested()
    with pytest.raises(exc.InvalidRequestError, match="no savepoints"):
        session.execute(sa.select(User.id))
