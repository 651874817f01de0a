//! Tests of the ordered index.
