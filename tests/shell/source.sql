-- sourced by source_file.script
CREATE TABLE s1 (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=ndbcluster;
INSERT INTO s1 VALUES (1, 'a;b'), (2, 'c');
SELECT * FROM nosuch;
ALL STATUS
SELECT * FROM s1 ORDER BY id;
