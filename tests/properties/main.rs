//! Property tests (proptest) of the algorithms: bounds every algorithm
//! keeps, the linear limiters' laws, and decisions on whatever state a
//! key holds. Failing cases are saved under `tests/proptest-regressions/`.

#[path = "../common/mod.rs"]
mod common;

mod all_properties;
mod discrete_refill_properties;
mod linear_properties;
mod sessionize_properties;
mod smyte_model;
mod state_repair_properties;
