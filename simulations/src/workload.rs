//! The workloads: who sends what, when, and through which limiter node.
//! Each is generated once from the seed and replayed, unchanged, through
//! every algorithm.

use std::num::NonZeroU64;
use std::time::Duration;

use memcache_ratelimit::Quota;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::traffic::{self, SECOND};

/// Where every run starts: 2027-01-15 08:00:00 UTC, a minute boundary, so
/// time 0 of a workload is a window boundary for every algorithm.
pub const START_UNIX_SECS: i64 = 1_800_000_000;

/// The quota every workload is limited to, the article's
/// "100 calls per minute".
pub const QUOTA: Quota = Quota::per_minute(NonZeroU64::new(100).unwrap());

/// One request: when (nanoseconds of true time since the start), from which
/// client (numbered from 0), through which node, at what cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// True time, in nanoseconds since the start.
    pub at: u64,
    /// The client, `0..clients`.
    pub client: u32,
    /// The limiter node that decides it, an index into `skews`.
    pub node: u16,
    /// The request's cost (1 in every workload here).
    pub cost: u64,
}

/// A client whose decisions are recorded over time, for the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trace {
    /// The client recorded.
    pub client: u32,
    /// Recording stops at this true time (nanoseconds since the start).
    pub until: u64,
}

/// A named stream of requests and the set-up it runs on.
#[derive(Debug, Clone)]
pub struct Workload {
    /// A short identifier for CSV rows: `poisson-1.1x`, `steady-2x`, ...
    pub id: String,
    /// What it is, for table headings.
    pub title: String,
    /// The quota every client is held to.
    pub quota: Quota,
    /// How many clients send (numbered `0..clients`).
    pub clients: u32,
    /// One entry per limiter node: how far its clock is ahead of true time,
    /// in nanoseconds (negative: behind). One node with skew 0 for all but
    /// the cluster.
    pub skews: Vec<i64>,
    /// The requests, in time order.
    pub requests: Vec<Request>,
    /// For a steady single client: its rate as a multiple of the limit.
    pub steady_factor: Option<f64>,
    /// The client whose decisions are recorded for the figures, if any.
    pub trace: Option<Trace>,
}

impl Workload {
    fn new(id: String, title: String, clients: u32, mut requests: Vec<Request>) -> Self {
        requests.sort_by_key(|r| r.at);
        Self {
            id,
            title,
            quota: QUOTA,
            clients,
            skews: vec![0],
            requests,
            steady_factor: None,
            trace: None,
        }
    }

    /// The length of the quota's period, in nanoseconds.
    pub fn period(&self) -> u64 {
        self.quota.period().as_nanos() as u64
    }

    /// Whether only one client sends, so "admitted before its first denial"
    /// is meaningful.
    pub fn single_client(&self) -> bool {
        self.clients == 1
    }
}

/// A seed for one workload, from the run's seed and the workload's id, so
/// adding a workload never changes another's traffic.
pub fn seed_for(seed: u64, id: &str) -> u64 {
    // FNV-1a over the id, then mixed with the run's seed.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    hash ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn per_second(factor: f64) -> f64 {
    factor * QUOTA.limit() as f64 / QUOTA.period().as_secs_f64()
}

fn minutes(m: u64) -> u64 {
    m * 60 * SECOND
}

/// A workload's id and the random source of its traffic, seeded from the
/// run's seed and that id ([`seed_for`]).
fn seeded(seed: u64, id: impl Into<String>) -> (String, StdRng) {
    let id = id.into();
    let rng = StdRng::seed_from_u64(seed_for(seed, &id));
    (id, rng)
}

/// `client`'s request at `at`, through node 0, of cost 1.
fn request(client: u32, at: u64) -> Request {
    Request {
        at,
        client,
        node: 0,
        cost: 1,
    }
}

fn one_node(client: u32, times: Vec<u64>) -> impl Iterator<Item = Request> {
    times.into_iter().map(move |at| request(client, at))
}

/// `clients` independent clients, each sending Poisson traffic at `factor`
/// times the limit for `length_min` minutes. Client 0's first five minutes
/// are traced.
pub fn poisson(seed: u64, factor: f64, clients: u32, length_min: u64) -> Workload {
    let (id, mut rng) = seeded(seed, format!("poisson-{factor}x"));
    let requests = (0..clients)
        .flat_map(|c| {
            one_node(
                c,
                traffic::poisson(&mut rng, per_second(factor), 0, minutes(length_min)),
            )
        })
        .collect();
    let title =
        format!("Poisson: {clients} clients, each at {factor}× the limit, {length_min} min");
    let mut workload = Workload::new(id, title, clients, requests);
    workload.trace = Some(Trace {
        client: 0,
        until: minutes(5).min(minutes(length_min)),
    });
    workload
}

/// One client sending evenly spaced requests at `factor` times the limit
/// for `length_min` minutes, from a window boundary on a fresh store.
pub fn steady(factor: f64, length_min: u64) -> Workload {
    let requests = one_node(
        0,
        traffic::steady(per_second(factor), 0, minutes(length_min)),
    )
    .collect();
    let mut workload = Workload::new(
        format!("steady-{factor}x"),
        format!("Steady: one client at {factor}× the limit, evenly spaced, {length_min} min"),
        1,
        requests,
    );
    workload.steady_factor = Some(factor);
    workload
}

/// `clients` clients in on/off bursts: Poisson at `factor` times the limit
/// for `on_s` seconds, then silent for `off_s` seconds, each client at a
/// random phase of the cycle, for `length_min` minutes.
pub fn on_off(
    seed: u64,
    clients: u32,
    factor: f64,
    on_s: u64,
    off_s: u64,
    length_min: u64,
) -> Workload {
    let (id, mut rng) = seeded(seed, "on-off");
    let cycle = (on_s + off_s) * SECOND;
    let requests = (0..clients)
        .flat_map(|c| {
            let phase = rng.random_range(0..cycle);
            let times = traffic::on_off(
                &mut rng,
                per_second(factor),
                on_s * SECOND,
                off_s * SECOND,
                phase,
                minutes(length_min),
            );
            one_node(c, times)
        })
        .collect();
    let title = format!(
        "On/off: {clients} clients, {on_s} s at {factor}× the limit then {off_s} s off, {length_min} min"
    );
    Workload::new(id, title, clients, requests)
}

/// One client spending the whole limit in the second before a minute
/// boundary and again in the second after it, every third boundary, for
/// `length_min` minutes.
pub fn boundary_attack(length_min: u64) -> Workload {
    let period = QUOTA.period().as_nanos() as u64;
    let times = traffic::boundary_attack(QUOTA.limit(), period, SECOND, 3, minutes(length_min));
    Workload::new(
        "boundary".to_owned(),
        format!(
            "Boundary attack: one client, {} requests in the second before a minute boundary and {} in the second after, every 3 min, {length_min} min",
            QUOTA.limit(),
            QUOTA.limit()
        ),
        1,
        one_node(0, times).collect(),
    )
}

/// `clients` clients with Zipf-like rates, client `k` (0-based) at
/// `heaviest / (k + 1)^exponent` times the limit, all Poisson, for
/// `length_min` minutes.
pub fn population(
    seed: u64,
    clients: u32,
    exponent: f64,
    heaviest: f64,
    length_min: u64,
) -> Workload {
    let (id, mut rng) = seeded(seed, "population");
    let weights = traffic::zipf_weights(clients as usize, exponent);
    let total = per_second(heaviest) * weights.iter().sum::<f64>();
    let requests = traffic::population(&mut rng, total, &weights, minutes(length_min))
        .into_iter()
        .map(|(at, client)| request(client, at))
        .collect();
    let title = format!(
        "Population: {clients} clients, client k at {heaviest}/k^{exponent} × the limit (Poisson), {length_min} min"
    );
    Workload::new(id, title, clients, requests)
}

/// A cluster of `nodes` limiter nodes sharing one store, node `i`'s clock
/// `(i − (nodes − 1)/2) × skew` ahead of true time (so neighbours differ by
/// `skew`), each request sent to a node drawn at random. `clients` clients
/// send Poisson traffic, client `k` at `0.5 (k + 1)` times the limit, for
/// `length_min` minutes. The traffic and node draws depend only on the seed,
/// not on the skew, so the skews are compared on the same requests.
pub fn cluster(seed: u64, nodes: u16, skew: Duration, clients: u32, length_min: u64) -> Workload {
    // Seeded by "cluster" alone, so every skew gets the same traffic.
    let (_, mut rng) = seeded(seed, "cluster");
    let mut requests: Vec<Request> = (0..clients)
        .flat_map(|c| {
            let factor = 0.5 * f64::from(c + 1);
            one_node(
                c,
                traffic::poisson(&mut rng, per_second(factor), 0, minutes(length_min)),
            )
        })
        .collect();
    requests.sort_by_key(|r| r.at);
    for request in &mut requests {
        request.node = rng.random_range(0..nodes);
    }
    let skew_ns = skew.as_nanos() as i64;
    let label = if skew.is_zero() {
        "0".to_owned()
    } else if skew.subsec_nanos() == 0 {
        format!("{}s", skew.as_secs())
    } else {
        format!("{}ms", skew.as_millis())
    };
    let mut workload = Workload::new(
        format!("cluster-skew-{label}"),
        format!(
            "Cluster: {nodes} nodes on one store, clocks {label} apart, {clients} clients at 0.5×–{}× the limit, {length_min} min",
            0.5 * f64::from(clients)
        ),
        clients,
        requests,
    );
    let middle = i64::from(nodes - 1);
    workload.skews = (0..i64::from(nodes))
        .map(|i| (2 * i - middle) * skew_ns / 2)
        .collect();
    workload
}

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Clients in each Poisson and on/off workload.
    pub clients: u32,
    /// Minutes of the Poisson, on/off and boundary workloads.
    pub minutes: u64,
    /// Minutes of each steady workload.
    pub steady_minutes: u64,
    /// Clients in the population.
    pub population: u32,
    /// Minutes of the population.
    pub population_minutes: u64,
    /// Clients in each cluster workload.
    pub cluster_clients: u32,
    /// Minutes of each cluster workload.
    pub cluster_minutes: u64,
}

impl Scale {
    /// The full run.
    pub const FULL: Scale = Scale {
        clients: 20,
        minutes: 60,
        steady_minutes: 20,
        population: 10_000,
        population_minutes: 60,
        cluster_clients: 10,
        cluster_minutes: 30,
    };
    /// A smaller run, for a quick look.
    pub const QUICK: Scale = Scale {
        clients: 3,
        minutes: 15,
        steady_minutes: 10,
        population: 2_000,
        population_minutes: 10,
        cluster_clients: 4,
        cluster_minutes: 10,
    };
}

/// The steady clients' rates, as multiples of the limit.
pub const STEADY_FACTORS: [f64; 6] = [0.5, 0.9, 1.1, 1.5, 2.0, 4.0];
/// The Poisson clients' rates, as multiples of the limit.
pub const POISSON_FACTORS: [f64; 3] = [0.9, 1.1, 1.5];
/// The cluster's clock skews between neighbouring nodes.
pub const SKEWS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(100),
    Duration::from_secs(1),
];

/// Every workload of a run.
pub fn all(seed: u64, scale: Scale) -> Vec<Workload> {
    let mut all: Vec<Workload> = POISSON_FACTORS
        .iter()
        .map(|&f| poisson(seed, f, scale.clients, scale.minutes))
        .collect();
    all.extend(
        STEADY_FACTORS
            .iter()
            .map(|&f| steady(f, scale.steady_minutes)),
    );
    all.push(on_off(seed, scale.clients, 5.0, 10, 40, scale.minutes));
    all.push(boundary_attack(scale.minutes));
    all.push(population(
        seed,
        scale.population,
        1.0,
        5.0,
        scale.population_minutes,
    ));
    all.extend(
        SKEWS
            .iter()
            .map(|&skew| cluster(seed, 3, skew, scale.cluster_clients, scale.cluster_minutes)),
    );
    all
}
