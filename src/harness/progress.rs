//! Progress of one long `kernbench run` on stderr, and the hint that a big
//! packet-fidelity run would be far faster in flow fidelity.
//!
//! [`RunProgress`] installs a [`sim::observe`](crate::sim::observe)
//! observer for the simulations run on the calling thread. After
//! [`SHOW_AFTER`] of wall time it shows one line, redrawn in place when
//! stderr is a terminal: the virtual time reached, the events so far, and
//! the pace (events and simulated time per wall second) from which a user
//! who knows roughly how long the run simulates can tell how long it has
//! left. Nothing is drawn when stderr is not a terminal (a log or a pipe)
//! or when the run ends sooner.
//!
//! The wall clock is read here, in the reporting, never in the model: the
//! observer gets copies of the executor's counters and changes nothing of
//! the run. Knows nothing of the CLI beyond "stderr".

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::sim::observe::{self, ObserverGuard};
use crate::sim::{SimDuration, SimStats};
use crate::topology::Fidelity;
use crate::workloads::{ByteSize, Options};

/// Wall time a run goes on before its progress line appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Bytes per rank (`--size`) from which a packet-fidelity run gets
/// [`packet_hint`]: every packet is an event at every hop, so such a run
/// takes tens of seconds or more where flow fidelity takes a fraction.
pub const PACKET_HINT_BYTES: u64 = 16 << 20;

/// The progress display of the runs on this thread until dropped.
pub struct RunProgress {
    _observer: Option<ObserverGuard>,
    bar: Option<ProgressBar>,
}

impl RunProgress {
    /// Watches the simulations run on this thread from now on; draws on
    /// stderr only if it is a terminal.
    pub fn start() -> RunProgress {
        if !std::io::stderr().is_terminal() {
            return RunProgress {
                _observer: None,
                bar: None,
            };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
        let started = Instant::now();
        let shown = bar.clone();
        let observer = observe::set_observer(move |stats: &SimStats| {
            let elapsed = started.elapsed();
            if elapsed >= SHOW_AFTER {
                shown.set_message(line(stats, elapsed));
            }
        });
        RunProgress {
            _observer: Some(observer),
            bar: Some(bar),
        }
    }
}

impl Drop for RunProgress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The progress line: virtual time reached, events, and the pace per wall
/// second.
pub fn line(stats: &SimStats, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let to_ns = |ps: u64| SimDuration::from_ps(ps - ps % 1000);
    let simulated = to_ns(stats.now.as_ps());
    let per_second = to_ns((stats.now.as_ps() as f64 / seconds) as u64);
    format!(
        "simulated {simulated} · {} events · {:.2} M events/s, {per_second} simulated per second ({:.0} s)",
        stats.events,
        stats.events as f64 / seconds / 1e6,
        elapsed.as_secs_f64()
    )
}

/// The one-line hint for a packet-fidelity run of `--size` at least
/// [`PACKET_HINT_BYTES`], else `None`.
pub fn packet_hint(fidelity: Fidelity, options: &Options) -> Option<String> {
    let size = options.get::<ByteSize>("size").ok().flatten()?;
    (fidelity == Fidelity::Packet && size.0 >= PACKET_HINT_BYTES).then(|| {
        format!(
            "hint: --size {size}: packet fidelity simulates every packet at every hop; \
             `--fidelity flow` gives the same uncontended times far faster"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimTime;

    #[test]
    fn the_line_says_time_events_and_pace() {
        let stats = SimStats {
            now: SimTime::ZERO + SimDuration::from_us(30),
            events: 4_000_000,
            polls: 5_000_000,
            spawned: 10,
            order_hash: 0,
        };
        let text = line(&stats, Duration::from_secs(4));
        assert!(text.starts_with("simulated 30"), "{text}");
        assert!(text.contains("4000000 events · 1.00 M events/s"), "{text}");
        // 30 µs in 4 s: 7.5 µs of virtual time per wall second.
        assert!(text.contains("7.5"), "{text}");
    }

    #[test]
    fn only_big_packet_runs_get_the_hint() {
        let big = Options::default().with("size", "16M");
        let small = Options::default().with("size", "1M");
        assert!(
            packet_hint(Fidelity::Packet, &big)
                .unwrap()
                .contains("--fidelity flow")
        );
        assert_eq!(packet_hint(Fidelity::Flow, &big), None);
        assert_eq!(packet_hint(Fidelity::Packet, &small), None);
        assert_eq!(packet_hint(Fidelity::Packet, &Options::default()), None);
    }
}
