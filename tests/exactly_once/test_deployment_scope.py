"""Which deployment name scopes a Spark graph's ledger entries (deployer.spark.datastores.sql.deployment_of)."""

from __future__ import annotations

from cpl.compiler import compile_script
from deployer.spark.datastores.store_calls import deployment_of
from deployer.spark.handlers import spark_graph
from stores.bindings import StoreBindings

SCRIPT = """
CREATE STREAMSCHEMA pay WITH id integer, amount integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE id = ?';
INSERT INTO charged SELECT id, c.n FROM pay ON SQL charge, c, amount, id, n;
"""


def test_named_deployments_and_the_default() -> None:
    graph = compile_script(SCRIPT).graph
    other = compile_script(SCRIPT.replace("amount - ?", "amount + ?")).graph
    # No name: one derived from the graph, the same on every run, different for another script.
    unnamed = deployment_of(spark_graph(graph, {}, StoreBindings({}, {})))
    assert unnamed == deployment_of(spark_graph(compile_script(SCRIPT).graph, {}, None))
    assert unnamed.startswith("cep-") and unnamed != deployment_of(spark_graph(other, {}, None))
    # A name from the stores configuration, or set on the graph by the deployer (which wins).
    sg = spark_graph(graph, {}, StoreBindings({}, {}, deployment="billing"))
    assert deployment_of(sg) == "billing"
    sg.deployment = "billing-v2"
    assert deployment_of(sg) == "billing-v2"
