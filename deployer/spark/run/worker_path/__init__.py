"""A directory put on the path of the Python workers a local Spark starts: its `sitecustomize`
runs first in each of them (deployer.spark.run.session.launch_jvm)."""
