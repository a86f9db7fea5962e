//! [`Algorithm`]: which algorithm a limiter runs, with the parameters it
//! takes beside the quota, as data.

/// Which algorithm a [`LimiterSpec`](crate::LimiterSpec) builds, with the parameters it takes
/// beside the quota.
///
/// ```
/// use memcache_ratelimit::Algorithm;
///
/// assert_eq!(Algorithm::default(), Algorithm::SlidingWindow { sub_windows: 4 });
/// assert_eq!(Algorithm::Gcra { burst: None }.name(), "gcra");
/// assert_eq!(Algorithm::SlidingWindow { sub_windows: 12 }.sub_windows(), Some(12));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// [`SlidingWindow`](super::SlidingWindow) with `sub_windows` sub-windows (dividing the period
    /// into whole milliseconds, at most
    /// [`MAX_SUB_WINDOWS`](crate::algorithm::MAX_SUB_WINDOWS)).
    SlidingWindow {
        /// The number of sub-windows, `n`.
        sub_windows: u32,
    },
    /// [`FixedWindow`](super::FixedWindow).
    FixedWindow,
    /// [`TokenBucket`](super::TokenBucket); `capacity` defaults to the quota's limit.
    TokenBucket {
        /// The bucket's capacity in tokens.
        capacity: Option<u64>,
    },
    /// [`Gcra`](super::Gcra); `burst` defaults to the quota's limit.
    Gcra {
        /// The most requests admitted at once.
        burst: Option<u64>,
    },
    /// [`SlidingLog`](super::SlidingLog).
    SlidingLog,
    /// [`HybridQuota`](super::HybridQuota).
    HybridQuota,
    /// [`DiscreteRefill`](super::DiscreteRefill): Smyte's token bucket,
    /// `refill` tokens back at each whole period (default: the quota's
    /// limit, a full bucket).
    DiscreteRefill {
        /// The tokens that come back at each whole period.
        refill: Option<u64>,
        /// Whether a request that leaves the bucket empty restarts its
        /// refill period (Smyte's `STRICT` flag).
        restart_when_empty: bool,
    },
    /// [`Sessionize`](super::Sessionize): Smyte's sessionizing bucket, the
    /// discrete refill always strict and restarting when empty, reporting
    /// when the client's session started.
    Sessionize {
        /// The tokens that come back at each whole period (default: the
        /// quota's limit).
        refill: Option<u64>,
    },
}

impl Default for Algorithm {
    /// The sliding window with
    /// [`DEFAULT_SUB_WINDOWS`](crate::algorithm::DEFAULT_SUB_WINDOWS)
    /// sub-windows.
    fn default() -> Self {
        Self::SlidingWindow {
            sub_windows: super::DEFAULT_SUB_WINDOWS,
        }
    }
}

impl Algorithm {
    /// The algorithm's name in configuration files and metrics:
    /// `sliding_window`, `fixed_window`, `token_bucket`, `gcra`,
    /// `sliding_log`, `hybrid_quota`, `discrete_refill` or `sessionize`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::SlidingWindow { .. } => "sliding_window",
            Self::FixedWindow => "fixed_window",
            Self::TokenBucket { .. } => "token_bucket",
            Self::Gcra { .. } => "gcra",
            Self::SlidingLog => "sliding_log",
            Self::HybridQuota => "hybrid_quota",
            Self::DiscreteRefill { .. } => "discrete_refill",
            Self::Sessionize { .. } => "sessionize",
        }
    }

    /// Every algorithm, by [`name`](Self::name), with its default
    /// parameters: 4 sub-windows, the token bucket's capacity, GCRA's
    /// burst and the discrete refill's and sessionize's amount left to the
    /// quota's limit, no restart when empty.
    pub const ALL: [Algorithm; 8] = [
        Self::SlidingWindow { sub_windows: 4 },
        Self::FixedWindow,
        Self::TokenBucket { capacity: None },
        Self::Gcra { burst: None },
        Self::SlidingLog,
        Self::HybridQuota,
        Self::DiscreteRefill {
            refill: None,
            restart_when_empty: false,
        },
        Self::Sessionize { refill: None },
    ];

    /// The algorithm called `name` (see [`name`](Self::name)), with its
    /// default parameters ([`ALL`](Self::ALL)).
    ///
    /// ```
    /// use memcache_ratelimit::Algorithm;
    ///
    /// assert_eq!(Algorithm::from_name("gcra"), Some(Algorithm::Gcra { burst: None }));
    /// assert_eq!(Algorithm::from_name("leaky_bucket"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|algorithm| algorithm.name() == name)
    }

    /// The sliding window's number of sub-windows; `None` for the other
    /// algorithms.
    pub fn sub_windows(&self) -> Option<u32> {
        match self {
            Self::SlidingWindow { sub_windows } => Some(*sub_windows),
            _ => None,
        }
    }

    /// Whether the algorithm decides by compare-and-swap, and so takes a
    /// [`CasPolicy`](super::CasPolicy): the token bucket, GCRA, the sliding log, the
    /// hybrid quota, the discrete refill and sessionize.
    pub fn uses_cas(&self) -> bool {
        matches!(
            self,
            Self::TokenBucket { .. }
                | Self::Gcra { .. }
                | Self::SlidingLog
                | Self::HybridQuota
                | Self::DiscreteRefill { .. }
                | Self::Sessionize { .. }
        )
    }
}

impl std::fmt::Display for Algorithm {
    /// The algorithm's type and the parameters set beside the quota:
    /// `SlidingWindow n=4`, `FixedWindow`, `TokenBucket`,
    /// `TokenBucket capacity=10`, `Gcra`, `Gcra burst=3`, `SlidingLog`,
    /// `HybridQuota`, `DiscreteRefill`, `DiscreteRefill refill=3`,
    /// `DiscreteRefill refill=3 restart_when_empty`, `Sessionize`,
    /// `Sessionize refill=3`.
    ///
    /// ```
    /// use memcache_ratelimit::Algorithm;
    ///
    /// assert_eq!(Algorithm::SlidingWindow { sub_windows: 4 }.to_string(), "SlidingWindow n=4");
    /// assert_eq!(Algorithm::Gcra { burst: None }.to_string(), "Gcra");
    /// assert_eq!(Algorithm::Gcra { burst: Some(3) }.to_string(), "Gcra burst=3");
    /// let smyte = Algorithm::DiscreteRefill { refill: Some(3), restart_when_empty: true };
    /// assert_eq!(smyte.to_string(), "DiscreteRefill refill=3 restart_when_empty");
    /// assert_eq!(Algorithm::Sessionize { refill: Some(3) }.to_string(), "Sessionize refill=3");
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SlidingWindow { sub_windows } => write!(f, "SlidingWindow n={sub_windows}"),
            Self::FixedWindow => f.write_str("FixedWindow"),
            Self::TokenBucket { capacity: None } => f.write_str("TokenBucket"),
            Self::TokenBucket {
                capacity: Some(tokens),
            } => write!(f, "TokenBucket capacity={tokens}"),
            Self::Gcra { burst: None } => f.write_str("Gcra"),
            Self::Gcra {
                burst: Some(requests),
            } => write!(f, "Gcra burst={requests}"),
            Self::SlidingLog => f.write_str("SlidingLog"),
            Self::HybridQuota => f.write_str("HybridQuota"),
            Self::DiscreteRefill {
                refill,
                restart_when_empty,
            } => {
                f.write_str("DiscreteRefill")?;
                if let Some(tokens) = refill {
                    write!(f, " refill={tokens}")?;
                }
                if *restart_when_empty {
                    f.write_str(" restart_when_empty")?;
                }
                Ok(())
            }
            Self::Sessionize { refill: None } => f.write_str("Sessionize"),
            Self::Sessionize {
                refill: Some(tokens),
            } => write!(f, "Sessionize refill={tokens}"),
        }
    }
}
