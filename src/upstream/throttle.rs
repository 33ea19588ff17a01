//! A bound on repeated warnings: a backend that prints garbage must not
//! turn every line into a log line (100 MB of it once made 102,400).

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Admits at most `burst` events per `window`; the first admitted event of
/// a window learns how many were suppressed before it.
pub(super) struct Throttle {
    burst: u32,
    window: Duration,
    state: Mutex<State>,
}

struct State {
    started: Option<Instant>,
    admitted: u32,
    suppressed: u64,
}

impl Throttle {
    pub(super) fn new(burst: u32, window: Duration) -> Throttle {
        Throttle {
            burst,
            window,
            state: Mutex::new(State {
                started: None,
                admitted: 0,
                suppressed: 0,
            }),
        }
    }

    /// Some(suppressed since the last admitted event) when this one may be
    /// logged; None when it is to be dropped (and counted).
    pub(super) fn admit(&self) -> Option<u64> {
        let now = Instant::now();
        let mut st = self.state.lock();
        if st
            .started
            .is_none_or(|t| now.duration_since(t) >= self.window)
        {
            st.started = Some(now);
            st.admitted = 0;
        }
        if st.admitted < self.burst {
            st.admitted += 1;
            Some(std::mem::take(&mut st.suppressed))
        } else {
            st.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn admits_a_burst_per_window_and_counts_the_rest() {
        let t = Throttle::new(3, Duration::from_secs(10));
        let admitted: Vec<_> = (0..1000).filter_map(|_| t.admit()).collect();
        assert_eq!(admitted, [0, 0, 0]);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(t.admit(), Some(997));
        assert_eq!(t.admit(), Some(0));
    }
}
