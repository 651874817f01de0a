//! Micro benchmark: one batch of 1000 primary-key reads through `Ndb::read_batch` and
//! `Ndb::read_batch_into`
//! against the same lookups in a `hashbrown::HashMap` (the limit), on 100k rows.

use criterion::{Criterion, criterion_group, criterion_main};
use rndb::Value;
use rndb::api::Cluster;
use rndb::config::ClusterConfig;
use rndb_benches::{Rng, kv_table, value_b};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let rows = 100_000u64;
    let mut cfg = ClusterConfig::embedded(1, 1).expect("config");
    cfg.set_data_node_param("DataMemory", "256M")
        .expect("DataMemory");
    let cluster = Cluster::embedded(cfg).expect("start");
    let ndb = cluster.ndb("test");
    let t = kv_table(&ndb, "t1", false).expect("table");
    let data: Vec<Vec<Value>> = (0..rows)
        .map(|i| vec![Value::UInt(i), Value::Int(i as i64), Value::Str(value_b(i))])
        .collect();
    ndb.insert_batch(&t, &[0, 1, 2], data).expect("load");
    let mut keys: Vec<u64> = (0..rows).collect();
    Rng::new(7).shuffle(&mut keys);
    let batch: Vec<Vec<Value>> = keys[..1000].iter().map(|&k| vec![Value::UInt(k)]).collect();
    c.bench_function("read_batch_1000", |b| {
        b.iter(|| black_box(ndb.read_batch(&t, &batch, &[0, 1, 2]).expect("read")))
    });
    let map: hashbrown::HashMap<u64, (i32, String)> =
        (0..rows).map(|i| (i, (i as i32, value_b(i)))).collect();
    c.bench_function("hashmap_get_1000", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for k in &keys[..1000] {
                if let Some((a, v)) = map.get(k) {
                    s = s.wrapping_add(*a as u64 + v.len() as u64);
                }
            }
            black_box(s)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
