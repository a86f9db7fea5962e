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
    /// How long the workload lasts, in nanoseconds: every request is in
    /// `[0, length)`.
    pub length: u64,
    /// For a steady single client: its rate as a multiple of the limit.
    pub steady_factor: Option<f64>,
    /// The client whose decisions are recorded for the figures, if any.
    pub trace: Option<Trace>,
}

impl Workload {
    pub(crate) fn new(
        id: String,
        title: String,
        clients: u32,
        length: u64,
        mut requests: Vec<Request>,
    ) -> Self {
        requests.sort_by_key(|r| r.at);
        debug_assert!(requests.iter().all(|r| r.at < length));
        Self {
            id,
            title,
            quota: QUOTA,
            clients,
            skews: vec![0],
            requests,
            length,
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

pub(crate) fn per_second(factor: f64) -> f64 {
    factor * QUOTA.limit() as f64 / QUOTA.period().as_secs_f64()
}

pub(crate) fn minutes(m: u64) -> u64 {
    m * 60 * SECOND
}

/// A workload's id and the random source of its traffic, seeded from the
/// run's seed and that id ([`seed_for`]).
pub(crate) fn seeded(seed: u64, id: impl Into<String>) -> (String, StdRng) {
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

pub(crate) fn one_node(client: u32, times: Vec<u64>) -> impl Iterator<Item = Request> {
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
    let mut workload = Workload::new(id, title, clients, minutes(length_min), requests);
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
        minutes(length_min),
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
    Workload::new(id, title, clients, minutes(length_min), requests)
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
        minutes(length_min),
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
    Workload::new(id, title, clients, minutes(length_min), requests)
}

/// What a source of the Cloudflare-like population ([`sources`]) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// Most sources: a log-normal rate, far below the limit, for the whole
    /// run.
    Background,
    /// A busy source just under the limit (0.7× to 1×) for the whole run:
    /// its Poisson bursts can cross the limit now and then.
    Busy,
    /// An abuser slightly above the limit (1× to 1.15×), for one attack of
    /// a few minutes.
    JustAbove,
    /// An abuser well above the limit (1.15× to 3×), for one attack of a
    /// few minutes.
    FarAbove,
}

/// One source of the Cloudflare-like population: Poisson traffic at
/// `factor` times the limit over `[from, to)` (nanoseconds since the
/// start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Source {
    /// What kind of source it is.
    pub kind: SourceKind,
    /// Its mean rate, as a multiple of the limit.
    pub factor: f64,
    /// When it starts sending.
    pub from: u64,
    /// When it stops.
    pub to: u64,
}

/// The parameters of the Cloudflare-like population ([`sources`]). Shares
/// are in sources per 10,000, rounded down; what is left is background.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SourcesSpec {
    /// How many sources.
    pub sources: u32,
    /// How long the run lasts, in minutes.
    pub minutes: u64,
    /// The background sources' median rate, as a multiple of the limit.
    pub median: f64,
    /// The standard deviation of the logarithm of the background rates.
    pub sigma: f64,
    /// Busy sources (0.7× to 1× the limit), per 10,000.
    pub busy: u32,
    /// Abusers just above the limit (1× to 1.15×), per 10,000.
    pub just_above: u32,
    /// Abusers well above the limit (1.15× to 3×), per 10,000.
    pub far_above: u32,
    /// The shortest and longest attack, in minutes.
    pub attack_minutes: (u64, u64),
}

impl SourcesSpec {
    /// The population of `sources` sources over `minutes` minutes: a median
    /// background source sends 0.2 requests a minute (0.002× the limit),
    /// with σ = 1.2, so 99% of them stay under 0.033× the limit; 0.05% are
    /// busy, 0.15% abuse just above the limit and 0.15% well above it, for
    /// 2 to 4 minutes each.
    pub const fn new(sources: u32, minutes: u64) -> Self {
        Self {
            sources,
            minutes,
            median: 0.002,
            sigma: 1.2,
            busy: 5,
            just_above: 15,
            far_above: 15,
            attack_minutes: (2, 4),
        }
    }

    fn count(&self, per_10_000: u32) -> u32 {
        (u64::from(self.sources) * u64::from(per_10_000) / 10_000) as u32
    }
}

/// A standard normal draw (Box–Muller), from two uniform draws.
fn standard_normal(rng: &mut StdRng) -> f64 {
    // 1 − U is in (0, 1], so the logarithm is finite.
    let u: f64 = rng.random();
    let v: f64 = rng.random();
    (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// The sources of the Cloudflare-like population, drawn from `rng`: the
/// busy sources first, then the abusers just above the limit, then those
/// well above it, then the background. Each abuser's attack lasts a
/// uniform whole number of seconds in `attack_minutes` and starts at a
/// uniform time that keeps it within the run.
pub fn draw_sources(rng: &mut StdRng, spec: &SourcesSpec) -> Vec<Source> {
    let length = minutes(spec.minutes);
    let (shortest, longest) = spec.attack_minutes;
    let whole = |kind, factor| Source {
        kind,
        factor,
        from: 0,
        to: length,
    };
    let attack = |rng: &mut StdRng, kind, factor| {
        let span = rng.random_range(shortest * 60..=longest * 60) * SECOND;
        let span = span.min(length);
        let from = rng.random_range(0..=length - span);
        Source {
            kind,
            factor,
            from,
            to: from + span,
        }
    };
    let (busy, just, far) = (
        spec.count(spec.busy),
        spec.count(spec.just_above),
        spec.count(spec.far_above),
    );
    let mut all = Vec::with_capacity(spec.sources as usize);
    for _ in 0..busy {
        let factor = rng.random_range(0.7..1.0);
        all.push(whole(SourceKind::Busy, factor));
    }
    for _ in 0..just {
        let factor = rng.random_range(1.0..1.15);
        all.push(attack(rng, SourceKind::JustAbove, factor));
    }
    for _ in 0..far {
        // Log-uniform: as likely between 1.15× and 1.5× as between 2.3× and 3×.
        let factor = (rng.random_range(1.15_f64.ln()..3.0_f64.ln())).exp();
        all.push(attack(rng, SourceKind::FarAbove, factor));
    }
    let background = spec.sources.saturating_sub(busy + just + far);
    for _ in 0..background {
        let factor = spec.median * (spec.sigma * standard_normal(rng)).exp();
        all.push(whole(SourceKind::Background, factor));
    }
    all
}

/// A Cloudflare-like population: many sources, most far below the limit
/// at heavy-tailed (log-normal) rates, a few busy ones just under it and a
/// few abusers above it, some only slightly ([`SourcesSpec`],
/// [`draw_sources`]). Every source sends Poisson traffic. It stands in for
/// the traffic of Cloudflare's analysis of its approximated sliding window,
/// whose make-up the article gives only as 400 million requests from
/// 270,000 sources (Julien Desgats, "How we built rate limiting capable of
/// scaling to millions of domains", Cloudflare blog, 2017,
/// <https://blog.cloudflare.com/counting-things-a-lot-of-different-things/>).
pub fn sources(seed: u64, spec: &SourcesSpec) -> Workload {
    let (id, mut rng) = seeded(seed, "sources");
    let plan = draw_sources(&mut rng, spec);
    let requests = plan
        .iter()
        .zip(0u32..)
        .flat_map(|(source, c)| {
            let times =
                traffic::poisson(&mut rng, per_second(source.factor), source.from, source.to);
            one_node(c, times)
        })
        .collect();
    let title = format!(
        "Cloudflare-like population: {} sources, log-normal rates (median {}× the limit, σ = {}), {} busy at 0.7–1×, {} abusers at 1–1.15× and {} at 1.15–3× for {}–{} min each, {} min",
        spec.sources,
        spec.median,
        spec.sigma,
        spec.count(spec.busy),
        spec.count(spec.just_above),
        spec.count(spec.far_above),
        spec.attack_minutes.0,
        spec.attack_minutes.1,
        spec.minutes,
    );
    Workload::new(id, title, spec.sources, minutes(spec.minutes), requests)
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
        minutes(length_min),
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
    /// Sources in the Cloudflare-like population.
    pub sources: u32,
    /// Minutes of the Cloudflare-like population.
    pub sources_minutes: u64,
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
        sources: 64_000,
        sources_minutes: 12,
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
        sources: 5_000,
        sources_minutes: 10,
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
    all.push(sources(
        seed,
        &SourcesSpec::new(scale.sources, scale.sources_minutes),
    ));
    all.extend(
        SKEWS
            .iter()
            .map(|&skew| cluster(seed, 3, skew, scale.cluster_clients, scale.cluster_minutes)),
    );
    all
}
