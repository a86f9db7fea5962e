//! Prints the traced client's decisions of one workload under two
//! estimators, side by side: `cargo run --release -p simulations --example
//! estimator_trace -- steady-2x 4`.

use memcache_ratelimit::algorithm::Estimator;
use simulations::algorithms::{Caches, DeniedRequests};
use simulations::estimators::Estimated;
use simulations::runner;
use simulations::workload::{self, Scale};

fn main() {
    let mut args = std::env::args().skip(1);
    let id = args.next().unwrap_or_else(|| "steady-2x".to_owned());
    let n: u32 = args.next().map_or(4, |n| n.parse().unwrap());
    let skip: usize = args.next().map_or(0, |n| n.parse().unwrap());
    let workloads = workload::all(1, Scale::FULL);
    let mut workload = workloads
        .into_iter()
        .find(|w| w.id == id)
        .expect("a workload id");
    workload.trace = Some(workload::Trace {
        client: 0,
        until: u64::MAX,
    });
    let workload = &workload;
    let traces: Vec<_> = [Estimator::Uniform, Estimator::Moment]
        .into_iter()
        .map(|estimator| {
            let limiter = Estimated {
                sub_windows: n,
                estimator,
            };
            runner::run_mode(
                workload,
                limiter,
                Caches::DEFAULT,
                DeniedRequests::Refunded,
                &|_| {},
            )
            .unwrap()
            .trace
        })
        .collect();
    for (u, m) in traces[0].iter().zip(&traces[1]).skip(skip).take(80) {
        println!(
            "{:8.3} s  uniform {:7.2} exact {:5.0} {}   moment {:7.2} exact {:5.0} {}",
            u.seconds(),
            u.estimate,
            u.exact,
            if u.allowed { "A" } else { "-" },
            m.estimate,
            m.exact,
            if m.allowed { "A" } else { "-" }
        );
    }
}
