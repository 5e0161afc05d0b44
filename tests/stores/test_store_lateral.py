"""The text of the batched Postgres read (no server needed: the SQL tests run it for real)."""

from __future__ import annotations

import pytest

from stores.sql.lateral import describe_statements, lateral_query, select_text


def test_placeholders_become_our_columns_and_percent_is_escaped() -> None:
    st = select_text("SELECT a, '?;%' FROM t WHERE b = ? AND c LIKE 'x%' AND d = ?;")
    sql = lateral_query(st, ["bigint", "text"])
    assert sql.startswith(
        "SELECT _cep_p._cep_ord, _cep_q.* FROM unnest(%s::bigint[], %s::text[]) WITH ORDINALITY"
        " AS _cep_p(_cep_a1, _cep_a2, _cep_ord) CROSS JOIN LATERAL (\n"
    )
    assert (
        "SELECT a, '?;%%' FROM t WHERE b = _cep_p._cep_a1 AND c LIKE 'x%%' AND d = _cep_p._cep_a2 \n" in sql
    )
    assert sql.endswith(") AS _cep_q ORDER BY _cep_p._cep_ord")
    assert sql.count("%s") == 2


def test_order_by_adds_a_row_number_key() -> None:
    st = select_text("select x from t where k = ? Order  By x -- desc?")
    assert st.ordered and len(st.params) == 1  # the `?` in the comment is not a parameter
    sql = lateral_query(st, ["integer"])
    assert "row_number() OVER () AS _cep_rn" in sql
    assert sql.endswith("ORDER BY _cep_p._cep_ord, _cep_q._cep_rn")
    assert not select_text("SELECT 'order by' FROM t").ordered


def test_no_parameters_uses_the_batch_size() -> None:
    sql = lateral_query(select_text("SELECT 1"), [])
    assert "generate_series(1, %s) AS _cep_p(_cep_ord)" in sql


def test_describe_uses_dollar_placeholders() -> None:
    prepare, _, deallocate = describe_statements(
        select_text("SELECT a FROM t WHERE b = ? AND c LIKE '%?'"), ["unknown"]
    )
    assert prepare == "PREPARE _cep_probe (unknown) AS\nSELECT a FROM t WHERE b = $1 AND c LIKE '%?'\n"
    assert deallocate == "DEALLOCATE _cep_probe"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1; SELECT 2", "exactly one statement"),
        ("   ;  ", "exactly one statement"),
        ("SELECT a FROM t WHERE b = $1", r"use \? for parameters"),
    ],
)
def test_refused_texts(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        select_text(text)
