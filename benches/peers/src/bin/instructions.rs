//! Runs one single-threaded scenario's decisions through the benchmarks' own timed loops
//! (`tollgate_peers::timing::decide_*`, compiled once in the library: the same machine code the
//! criterion benchmarks run), for counting instructions under callgrind:
//!
//! ```text
//! cargo build -p tollgate-peers --profile bench --bin instructions --benches
//! instructions list                 # the scenarios, one a line
//! valgrind --tool=callgrind --collect-atstart=no \
//!     '--toggle-collect=tollgate_peers::timing::decide_*' instructions SCENARIO DECISIONS
//! ```
//!
//! (`--benches`, so that this binary links the library build the benchmarks link: see
//! `tollgate_peers::timing`.) Collection is on only inside the timed loops (the generic loops;
//! the `DirectLoops`/`KeyedLoops` methods that call them are outside), so building, filling and
//! checking limiters count for nothing, and the instructions counted divided by DECISIONS is the
//! cost of one decision plus the loop's own few instructions (scenario `direct/loop/nothing`
//! measures those).
//! `benches/instructions.py` runs every scenario and writes the table.
//!
//! Allowed-path scenarios run in chunks of 10,000 decisions on fresh limiters, as the criterion
//! benchmark does; keyed scenarios fill their limiter before the loop, with every key decided once.
//! Keyed limiters run the long-lived quota (`TollgateKeyed::long_lived`): under callgrind a fill
//! of 1,000,000 keys takes many seconds, and with the benchmark quota's ten seconds of debt per
//! decision the first keys would be idle, and reclaimed, before the loop reached them.

use std::process::ExitCode;

use governor::clock::{QuantaClock, QuantaUpkeepClock};
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{
    Clock, CoarseClock, DirectLimiter, FixedWindow, LeakyBucket, Live, LogLimiter, PreciseClock, SlidingLog,
    SlidingWindow, TokenBucket,
};
use tollgate_peers::zipf::zipf_sequence;
use tollgate_peers::{
    tollgate_fixed_window, tollgate_fixed_window_live, tollgate_leaky_bucket, tollgate_sliding_window,
    tollgate_sliding_window_live, tollgate_token_bucket, tollgate_token_bucket_live, ClockRead,
    ClockReadHashLoadCas16, ClockReadHashLoadTagCas8, ClockReadHashPlaceLoadCas16,
    ClockReadHashPlaceLoadTagCas8, ClockReadLoadCas, Direct, DirectContender, DirectLoops, GovernorClockRead,
    GovernorDirect, GovernorKeyed, InstantRead, Keyed, KeyedContender, KeyedFloorContender, KeyedLoops,
    MinimalBucket, MinimalFixed, MinimalFixedWindow, MinimalGcra, MinimalSliding, MinimalSlidingWindow,
    MutexBucketDirect, Nothing, RatelimitDirect, TollgateElapsed, TollgateKeyed, TollgateKeyedLive,
    TollgateKeyedSet, TollgateLog, TollgateLogLive, TollgateSet, ALLOWED_RUN,
};

/// A scenario: its name and what runs it for a number of decisions.
type Scenario = (String, Box<dyn Fn(u64)>);

/// Key counts of the keyed scenarios.
const KEY_COUNTS: [u64; 2] = [1_000, 1_000_000];
/// Length of each Zipf-like key sequence.
const ZIPF_LEN: usize = 1 << 20;

fn direct_rows<T: DirectContender + 'static>(scenarios: &mut Vec<Scenario>, clock: &str, contender: T) {
    let contender = std::rc::Rc::new(contender);
    let name = contender.name().to_owned();
    let allowed = contender.clone();
    scenarios.push((
        format!("direct/{clock}/{name}/allowed"),
        Box::new(move |decisions| {
            let mut left = decisions;
            while left > 0 {
                let limiter = allowed.allowed();
                let n = left.min(ALLOWED_RUN);
                limiter.decide_direct(n);
                assert!(
                    T::Limiter::admitted(&limiter.check()),
                    "the allowed path must stay allowed"
                );
                left -= n;
            }
        }),
    ));
    scenarios.push((
        format!("direct/{clock}/{name}/denied"),
        Box::new(move |decisions| {
            let limiter = contender.denied();
            limiter.decide_direct(decisions);
            assert!(
                !T::Limiter::admitted(&limiter.check()),
                "the denied path must refuse"
            );
        }),
    ));
}

fn floor_row<L: DirectLoops + 'static>(scenarios: &mut Vec<Scenario>, name: String, limiter: L) {
    scenarios.push((
        name,
        Box::new(move |decisions| {
            limiter.decide_direct(decisions);
        }),
    ));
}

/// The floors and tollgate's direct limiters on one clock (each type's loop compiled once, in
/// `tollgate_peers`).
fn direct_clock<C: Clock + Clone + 'static>(scenarios: &mut Vec<Scenario>, clock_name: &str, clock: C)
where
    ClockRead<C>: DirectLoops,
    ClockReadLoadCas<C>: DirectLoops,
    ClockReadHashLoadCas16<C>: DirectLoops,
    ClockReadHashLoadTagCas8<C>: DirectLoops,
    ClockReadHashPlaceLoadCas16<C>: DirectLoops,
    ClockReadHashPlaceLoadTagCas8<C>: DirectLoops,
    MinimalGcra<C>: DirectLoops,
    DirectLimiter<TokenBucket, C>: DirectLoops,
    DirectLimiter<LeakyBucket, C>: DirectLoops,
    DirectLimiter<FixedWindow, C>: DirectLoops,
    DirectLimiter<SlidingWindow, C>: DirectLoops,
    LogLimiter<C>: DirectLoops,
    MinimalFixedWindow<C>: DirectLoops,
    MinimalSlidingWindow<C>: DirectLoops,
{
    floor_row(
        scenarios,
        format!("direct/{clock_name}/floor/clock_read"),
        ClockRead(clock.clone()),
    );
    floor_row(
        scenarios,
        format!("direct/{clock_name}/floor/clock_read+load+cas"),
        ClockReadLoadCas::new(clock.clone()),
    );
    floor_row(
        scenarios,
        format!("direct/{clock_name}/floor/clock_read+hash+load16+cas16"),
        ClockReadHashLoadCas16::new(clock.clone()),
    );
    floor_row(
        scenarios,
        format!("direct/{clock_name}/floor/clock_read+hash+load8x2+cas8"),
        ClockReadHashLoadTagCas8::new(clock.clone()),
    );
    floor_row(
        scenarios,
        format!("direct/{clock_name}/floor/clock_read+hash+place+load16+cas16"),
        ClockReadHashPlaceLoadCas16::new(clock.clone()),
    );
    floor_row(
        scenarios,
        format!("direct/{clock_name}/floor/clock_read+hash+place+load8x2+cas8"),
        ClockReadHashPlaceLoadTagCas8::new(clock.clone()),
    );
    direct_rows(scenarios, clock_name, tollgate_token_bucket(clock.clone()));
    direct_rows(scenarios, clock_name, tollgate_leaky_bucket(clock.clone()));
    direct_rows(scenarios, clock_name, tollgate_fixed_window(clock.clone()));
    direct_rows(scenarios, clock_name, tollgate_sliding_window(clock.clone()));
    direct_rows(scenarios, clock_name, TollgateLog(clock.clone()));
    direct_rows(scenarios, clock_name, MinimalBucket(clock.clone()));
    direct_rows(scenarios, clock_name, MinimalFixed(clock.clone()));
    direct_rows(scenarios, clock_name, MinimalSliding(clock));
}

/// The keyed scenarios of `contender` on `clock`: the hot key, round-robin and Zipf orders, and
/// the insert when `inserts` (the floor has none).
fn keyed_rows<C: KeyedContender + 'static>(
    scenarios: &mut Vec<Scenario>,
    clock: &str,
    contender: C,
    inserts: bool,
) {
    let contender = std::rc::Rc::new(contender);
    let name = C::NAME;
    let hot = contender.clone();
    scenarios.push((
        format!("keyed/{clock}/hot_key/{name}"),
        Box::new(move |decisions| {
            let limiter = hot.filled(10_000, 1);
            limiter.decide_in_turn(decisions, 0, 1);
        }),
    ));
    for keys in KEY_COUNTS {
        let round = contender.clone();
        scenarios.push((
            format!("keyed/{clock}/round_robin/{name}/{keys}"),
            Box::new(move |decisions| {
                let limiter = round.filled(keys as usize, keys);
                limiter.decide_in_turn(decisions, 0, keys);
            }),
        ));
        let zipf = contender.clone();
        scenarios.push((
            format!("keyed/{clock}/zipf/{name}/{keys}"),
            Box::new(move |decisions| {
                let sequence = zipf_sequence(keys, ZIPF_LEN);
                let limiter = zipf.filled(keys as usize, keys);
                limiter.decide_in_sequence(decisions, &sequence, &mut 0);
            }),
        ));
    }
    if !inserts {
        return;
    }
    let insert = contender;
    scenarios.push((
        format!("keyed/{clock}/insert/{name}"),
        Box::new(move |decisions| {
            // `decisions` fresh keys into a limiter built for that many: empty to full.
            let limiter = insert.build(decisions as usize);
            limiter.decide_each_once(decisions);
            assert_eq!(
                limiter.keys() as u64,
                decisions,
                "every fresh key must be inserted"
            );
        }),
    ));
}

fn scenarios() -> Vec<Scenario> {
    let mut scenarios = Vec::new();
    floor_row(&mut scenarios, "direct/loop/nothing".to_owned(), Nothing);

    direct_clock(&mut scenarios, "precise", PreciseClock::new());
    floor_row(
        &mut scenarios,
        "direct/precise/floor/std_instant_now".to_owned(),
        InstantRead,
    );
    floor_row(
        &mut scenarios,
        "direct/precise/floor/governor_clock_read".to_owned(),
        GovernorClockRead::new(QuantaClock::default()),
    );
    direct_rows(&mut scenarios, "precise", GovernorDirect(QuantaClock::default()));
    direct_rows(
        &mut scenarios,
        "precise",
        RatelimitDirect::new("ratelimit", || TollgateElapsed::new(PreciseClock::new())),
    );
    direct_rows(
        &mut scenarios,
        "precise",
        RatelimitDirect::new("ratelimit_std", ratelimit::StdClock::new),
    );
    direct_rows(&mut scenarios, "precise", MutexBucketDirect);
    keyed_rows(
        &mut scenarios,
        "precise",
        TollgateKeyed::long_lived(PreciseClock::new()),
        true,
    );
    #[cfg(feature = "metrics")]
    keyed_rows(
        &mut scenarios,
        "precise",
        tollgate_peers::TollgateKeyedMetered(TollgateKeyed::long_lived(PreciseClock::new())),
        true,
    );
    keyed_rows(
        &mut scenarios,
        "precise",
        GovernorKeyed::long_lived(QuantaClock::default()),
        true,
    );
    keyed_rows(
        &mut scenarios,
        "precise",
        KeyedFloorContender(PreciseClock::new()),
        false,
    );

    direct_clock(&mut scenarios, "coarse", CoarseClock::new());
    direct_rows(
        &mut scenarios,
        "coarse",
        RatelimitDirect::new("ratelimit", || TollgateElapsed::new(CoarseClock::new())),
    );
    // governor's upkeep thread (its quanta 0.12, separate from tollgate's), at tollgate's interval.
    let upkeep = QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL)
        .expect("governor's quanta upkeep thread starts");
    floor_row(
        &mut scenarios,
        "direct/coarse/floor/governor_clock_read".to_owned(),
        GovernorClockRead::new(upkeep.clone()),
    );
    direct_rows(&mut scenarios, "coarse", GovernorDirect(upkeep.clone()));
    keyed_rows(
        &mut scenarios,
        "coarse",
        TollgateKeyed::long_lived(CoarseClock::new()),
        true,
    );
    #[cfg(feature = "metrics")]
    keyed_rows(
        &mut scenarios,
        "coarse",
        tollgate_peers::TollgateKeyedMetered(TollgateKeyed::long_lived(CoarseClock::new())),
        true,
    );
    keyed_rows(&mut scenarios, "coarse", GovernorKeyed::long_lived(upkeep), true);
    keyed_rows(
        &mut scenarios,
        "coarse",
        KeyedFloorContender(CoarseClock::new()),
        false,
    );
    changeable(&mut scenarios, "precise", PreciseClock::new());
    changeable(&mut scenarios, "coarse", CoarseClock::new());
    scenarios
}

/// tollgate's changeable limiters and policy sets on one clock (`src/changeable.rs`).
fn changeable<C: Clock + Clone + 'static>(scenarios: &mut Vec<Scenario>, clock_name: &str, clock: C)
where
    DirectLimiter<Live<TokenBucket>, C>: DirectLoops,
    DirectLimiter<Live<FixedWindow>, C>: DirectLoops,
    DirectLimiter<Live<SlidingWindow>, C>: DirectLoops,
    LogLimiter<C, Live<SlidingLog>>: DirectLoops,
    TollgateKeyedLive<C>: KeyedContender,
    TollgateKeyedSet<C, 2>: KeyedContender,
    TollgateKeyedSet<C, 3>: KeyedContender,
{
    direct_rows(scenarios, clock_name, tollgate_token_bucket_live(clock.clone()));
    direct_rows(scenarios, clock_name, tollgate_fixed_window_live(clock.clone()));
    direct_rows(scenarios, clock_name, tollgate_sliding_window_live(clock.clone()));
    direct_rows(scenarios, clock_name, TollgateLogLive(clock.clone()));
    for policies in 1..=3 {
        direct_rows(scenarios, clock_name, TollgateSet::new(clock.clone(), policies));
    }
    keyed_rows(
        scenarios,
        clock_name,
        TollgateKeyedLive::long_lived(clock.clone()),
        false,
    );
    keyed_rows(
        scenarios,
        clock_name,
        TollgateKeyedSet::<C, 2>::long_lived(clock.clone()),
        false,
    );
    keyed_rows(
        scenarios,
        clock_name,
        TollgateKeyedSet::<C, 3>::long_lived(clock),
        false,
    );
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = scenarios();
    if args.first().map(String::as_str) == Some("list") {
        for (name, _) in &all {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    let (Some(wanted), Some(Ok(decisions))) = (args.first(), args.get(1).map(|n| n.parse::<u64>())) else {
        eprintln!("usage: instructions list | instructions SCENARIO DECISIONS");
        return ExitCode::FAILURE;
    };
    match all.iter().find(|(name, _)| name == wanted) {
        Some((_, run)) => {
            run(decisions);
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("no scenario {wanted:?}; `instructions list` lists them");
            ExitCode::FAILURE
        }
    }
}
