use std::time::Duration;

use super::core::*;
use crate::algorithm::cas::core::{Ask, CasCore};

#[test]
fn emission_interval_is_exact_for_awkward_rates() {
    // 3 per second: T = 333,333,333.3 ns. Three requests at every whole
    // second fit exactly for 1,000 s; a rounded T would drift by a
    // nanosecond a second and start denying.
    let core = GcraCore::new(3, "3/second".parse().unwrap());
    let mut tat = None;
    for second in 0..1_000i64 {
        let step = core.decide(tat.as_ref(), Ask::at(3, second * 1_000_000_000));
        assert!(step.decision.is_allowed(), "at {second} s");
        assert_eq!(step.decision.remaining(), 0);
        tat = Some(step.write.unwrap().0);
    }
    let fourth = core.decide(tat.as_ref(), Ask::at(1, 999_000_000_000));
    assert!(fourth.decision.is_denied());
    assert_eq!(
        fourth.decision.retry_after(),
        Some(Duration::from_nanos(333_333_334))
    );
}

#[test]
fn delay_mode_queues_within_the_maximum_and_rejects_beyond() {
    let core = GcraCore::new(1, "10/second".parse().unwrap());
    let first = core.decide(None, Ask::at(1, 0));
    let tat = first.write.unwrap().0;
    let queued = core.decide(
        Some(&tat),
        Ask {
            max_delay: Duration::from_millis(100),
            ..Ask::at(1, 0)
        },
    );
    assert!(queued.decision.is_allowed());
    assert_eq!(queued.delay, Duration::from_millis(100));
    let too_far = core.decide(
        Some(&queued.write.unwrap().0),
        Ask {
            max_delay: Duration::from_millis(100),
            ..Ask::at(1, 0)
        },
    );
    assert!(too_far.decision.is_denied());
    assert!(too_far.write.is_none(), "a rejection reserves nothing");
}
