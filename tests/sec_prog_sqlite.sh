#!/bin/sh
# sec_prog_sqlite: sqlite3 builds a table of 200,000 rows, indexes it and
# answers queries, identically with and without cagemalloc.
. "$(dirname "$0")/sec_prog_lib.sh"
need sqlite3
cat > "$work/script.sql" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO t SELECT i, i % 97, printf('name-%d-%s', i, hex(i * 7919)), (i * 31 % 1000) / 7.0 FROM n;
CREATE INDEX t_grp ON t(grp, name);
SELECT count(*), sum(grp), round(sum(val), 3) FROM t;
SELECT grp, count(*), min(name), max(name), round(avg(val), 4) FROM t GROUP BY grp ORDER BY grp LIMIT 20;
SELECT name FROM t WHERE grp = 42 ORDER BY name DESC LIMIT 5;
SELECT count(DISTINCT substr(name, 1, 8)) FROM t;
SQL
cat > "$work/run.sh" <<RUN
rm -f "$work/db"
sqlite3 "$work/db" < "$work/script.sql"
RUN
compare sqlite "$work/run.sh"
echo "sqlite3: 200,000 rows, index and queries identical under cagemalloc"
