-- A catalog migrated, and one script deployed, by cep before the migrations moved from
-- deployer/service/migrations/ to migrations/ (SQLite, dumped with sqlite3's iterdump).
-- tests/service/test_migrations_layout.py checks that the new layout finds it at head.
BEGIN TRANSACTION;
CREATE TABLE cep_catalog_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT cep_catalog_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "cep_catalog_version" VALUES('0001');
CREATE TABLE deployment_history (
	id INTEGER NOT NULL, 
	name VARCHAR(63) NOT NULL, 
	at DATETIME NOT NULL, 
	event VARCHAR(32) NOT NULL, 
	detail TEXT, 
	PRIMARY KEY (id)
);
INSERT INTO "deployment_history" VALUES(1,'priced_calls','2026-11-28 10:09:50.240647','deployed','script sha256 cceff0712137, checkpoint checkpoints/priced_calls/20261128100950-b5a586');
CREATE TABLE deployments (
	name VARCHAR(63) NOT NULL, 
	script TEXT NOT NULL, 
	script_hash VARCHAR(64) NOT NULL, 
	bindings JSON NOT NULL, 
	desired_state VARCHAR(16) NOT NULL, 
	actual_state VARCHAR(16) NOT NULL, 
	revision INTEGER NOT NULL, 
	checkpoint VARCHAR(1024) NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	last_error TEXT, 
	last_error_at DATETIME, 
	restarts INTEGER NOT NULL, 
	events_in BIGINT NOT NULL, 
	events_out BIGINT NOT NULL, 
	last_batch BIGINT, 
	last_batch_at DATETIME, 
	lag_ms BIGINT, 
	progress JSON, 
	PRIMARY KEY (name), 
	CONSTRAINT deployments_desired_state CHECK (desired_state IN ('running', 'stopped')), 
	CONSTRAINT deployments_actual_state CHECK (actual_state IN ('pending', 'starting', 'running', 'failed', 'stopped'))
);
INSERT INTO "deployments" VALUES('priced_calls','-- calls of 10 s and more, priced
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO priced SELECT id, caller, duration * 2 AS cost, ts FROM calls WHERE duration >= 10;
','cceff0712137d3bcd508f617e8f4b13efe23bd71c944ae83396c46422d099e32','{"sources": {"calls": "file:/srv/in"}, "sinks": {"priced": "file:/srv/out"}, "stores": {}, "dead_letter": null}','running','pending',1,'checkpoints/priced_calls/20261128100950-b5a586','2026-11-28 10:09:50.239209','2026-11-28 10:09:50.239209',NULL,NULL,0,0,0,NULL,NULL,NULL,NULL);
CREATE TABLE service_heartbeat (
	instance VARCHAR(200) NOT NULL, 
	started_at DATETIME NOT NULL, 
	seen_at DATETIME NOT NULL, 
	master VARCHAR(500), 
	PRIMARY KEY (instance)
);
CREATE INDEX ix_deployment_history_name ON deployment_history (name);
COMMIT;
