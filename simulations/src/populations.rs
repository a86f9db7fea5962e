//! Three Cloudflare-like populations of the same make-up
//! ([`make_up`]: log-normal background rates, a few busy sources just
//! under the limit, a few abusers above it), 60,000 sources over seven
//! minutes, that differ in how each source's requests come:
//!
//! - **stationary**: every source sends Poisson traffic at its rate for the
//!   whole run, abusers included;
//! - **page-load bursts**: each source's traffic comes in page loads of 5 to
//!   20 requests within two seconds, the loads a Poisson process at the
//!   source's rate over the requests per load;
//! - **random onsets**: the abusers attack for two to four minutes, each
//!   starting at a random time, as in the [`sources`](crate::workload::sources)
//!   workload.
//!
//! The sliding window's estimators are compared on them
//! ([`estimators`](crate::estimators)), under Cloudflare's measure in
//! particular.

use rand::rngs::StdRng;
use rand::Rng;

use crate::traffic::{self, SECOND};
use crate::workload::{
    draw_sources, minutes, one_node, per_second, seeded, Request, Source, SourcesSpec, Workload,
};

/// The sources of every population.
pub const SOURCES: u32 = 60_000;
/// The length of every population, in minutes.
pub const MINUTES: u64 = 7;
/// The fewest and most requests of one page load.
const PAGE_LOAD: (u64, u64) = (5, 20);
/// How long the requests of one page load spread over.
const PAGE_LOAD_SPREAD: u64 = 2 * SECOND;

/// The make-up of every population of `sources` sources over `minutes`
/// minutes: background rates with a median of 0.005× the limit and σ = 1.5
/// (wider than the sources workload's), 0.09% busy sources, 0.10% abusers
/// just above the limit and 0.04% well above it. Under Cloudflare's measure
/// the uniform rule then makes 0.63, 0.33 and 0.21% wrong decisions at 1,
/// 4 and 12 sub-windows on the stationary population, with mean relative
/// differences of 8.4, 3.2 and 1.4% (seed 1). Against the sources
/// workload's make-up, fewer abusers far above the limit, whose decisions
/// are easy, leave the sources near it a larger share of the requests.
pub fn make_up(sources: u32, minutes: u64) -> SourcesSpec {
    SourcesSpec {
        median: 0.005,
        sigma: 1.5,
        busy: 9,
        just_above: 10,
        far_above: 4,
        ..SourcesSpec::new(sources, minutes)
    }
}

/// The three populations, with `sources` sources over `minutes` minutes
/// each ([`SOURCES`] and [`MINUTES`] in the comparison).
pub fn all(seed: u64, sources: u32, minutes: u64) -> Vec<Workload> {
    let spec = make_up(sources, minutes);
    vec![
        stationary(seed, &spec),
        page_loads(seed, &spec),
        onsets(seed, &spec),
    ]
}

/// The sources every population shares: the same kinds, rates and
/// attack spans, drawn from the run's seed.
fn plan(seed: u64, spec: &SourcesSpec) -> Vec<Source> {
    let (_, mut rng) = seeded(seed, "population");
    draw_sources(&mut rng, spec)
}

/// Every source at its rate for the whole run.
pub fn stationary(seed: u64, spec: &SourcesSpec) -> Workload {
    let (id, mut rng) = seeded(seed, "population-stationary");
    let length = minutes(spec.minutes);
    let plan: Vec<Source> = plan(seed, spec)
        .into_iter()
        .map(|source| Source {
            from: 0,
            to: length,
            ..source
        })
        .collect();
    let requests = poisson_requests(&mut rng, &plan);
    let title = format!(
        "Stationary population: {} sources, each at a constant Poisson rate for the whole run (the sources workload's rates), {} min",
        spec.sources, spec.minutes
    );
    Workload::new(id, title, spec.sources, length, requests)
}

/// Every source's traffic in page loads.
pub fn page_loads(seed: u64, spec: &SourcesSpec) -> Workload {
    let (id, mut rng) = seeded(seed, "population-page-loads");
    let length = minutes(spec.minutes);
    let plan = plan(seed, spec);
    let requests = plan
        .iter()
        .zip(0u32..)
        .flat_map(|(source, client)| {
            let size = rng.random_range(PAGE_LOAD.0..=PAGE_LOAD.1);
            let loads = traffic::poisson(
                &mut rng,
                per_second(source.factor) / size as f64,
                source.from,
                source.to,
            );
            let times: Vec<u64> = loads
                .into_iter()
                .flat_map(|start| page_load(&mut rng, start, size, length))
                .collect();
            one_node(client, times).collect::<Vec<_>>()
        })
        .collect();
    let title = format!(
        "Page-load population: {} sources, each sending page loads of {}–{} requests within {} s, at the sources workload's rates, {} min",
        spec.sources,
        PAGE_LOAD.0,
        PAGE_LOAD.1,
        PAGE_LOAD_SPREAD / SECOND,
        spec.minutes
    );
    Workload::new(id, title, spec.sources, length, requests)
}

/// Abusers starting at random times.
pub fn onsets(seed: u64, spec: &SourcesSpec) -> Workload {
    let (id, mut rng) = seeded(seed, "population-onsets");
    let plan = plan(seed, spec);
    let requests = poisson_requests(&mut rng, &plan);
    let title = format!(
        "Random-onset population: {} sources, the abusers attacking for {}–{} min from a random time, {} min",
        spec.sources, spec.attack_minutes.0, spec.attack_minutes.1, spec.minutes
    );
    Workload::new(id, title, spec.sources, minutes(spec.minutes), requests)
}

/// Poisson traffic of each source of `plan` over its span.
fn poisson_requests(rng: &mut StdRng, plan: &[Source]) -> Vec<Request> {
    plan.iter()
        .zip(0u32..)
        .flat_map(|(source, client)| {
            let times = traffic::poisson(rng, per_second(source.factor), source.from, source.to);
            one_node(client, times).collect::<Vec<_>>()
        })
        .collect()
}

/// The `size` requests of a page load starting at `start`, spread
/// uniformly over [`PAGE_LOAD_SPREAD`], the ones past `length` dropped.
fn page_load(rng: &mut StdRng, start: u64, size: u64, length: u64) -> Vec<u64> {
    (0..size)
        .map(|_| start + rng.random_range(0..PAGE_LOAD_SPREAD))
        .filter(|&at| at < length)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_populations_share_their_rates_and_differ_in_shape() {
        let populations = all(7, 10_000, 5);
        let ids: Vec<&str> = populations.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "population-stationary",
                "population-page-loads",
                "population-onsets"
            ]
        );
        let counts: Vec<usize> = populations.iter().map(|w| w.requests.len()).collect();
        // The same rates: the stationary one has the most (abusers all the
        // way through), page loads about as many as the onsets.
        assert!(counts[0] > counts[2], "{counts:?}");
        let ratio = counts[1] as f64 / counts[2] as f64;
        assert!((0.7..1.3).contains(&ratio), "{counts:?}");
        // Page loads come in bunches: the background sources' requests
        // mostly follow their previous one within 2 s, where Poisson
        // traffic at their rates (a few a minute) seldom does.
        let close = |w: &Workload| {
            let mut sent = vec![0usize; w.clients as usize];
            for r in &w.requests {
                sent[r.client as usize] += 1;
            }
            let mut last = vec![None; w.clients as usize];
            let (mut close, mut all) = (0, 0);
            for r in w.requests.iter().filter(|r| sent[r.client as usize] < 50) {
                if let Some(before) = last[r.client as usize] {
                    close += usize::from(r.at - before < PAGE_LOAD_SPREAD);
                    all += 1;
                }
                last[r.client as usize] = Some(r.at);
            }
            close as f64 / all as f64
        };
        let (loads, onsets) = (close(&populations[1]), close(&populations[2]));
        assert!(loads > 0.5 && onsets < 0.2, "{loads} {onsets}");
    }
}
