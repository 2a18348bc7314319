//! The row of a job that a run holds, locked, as every path that ends runs reads it: the rules' one
//! type for it (`held_rows!` in `sql/jobs.rs` reads it).

pub(super) use crate::store::rules::Held;
