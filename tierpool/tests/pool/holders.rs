//! Feature `holders`: tracked buffers are listed by the call site that took them until they
//! come back, however they come back (a drop on another thread, the last shared view,
//! `into_vec`), and tracking leaves a budget's accounting whole.
#![cfg(feature = "holders")]

use tierpool::BufferPool;

#[test]
fn a_forgotten_buffer_is_found_by_its_call_site() {
    let pool = BufferPool::builder().track_holders(1).build().unwrap();
    for _ in 0..100 {
        drop(pool.get(4096)); // returned at once: never listed
    }
    let forgotten_line = line!() + 1;
    let forgotten = pool.get(64 << 10);
    let shared_line = line!() + 1;
    let mut filled = pool.get(1000);
    filled.extend_from_slice(b"0123456789");
    let shared = filled.into_shared();
    let view = shared.slice(1..3);

    let h = pool.holders();
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(h[0].location.file(), file!());
    assert_eq!(
        h[0].location.line(),
        forgotten_line,
        "most bytes first: {h:?}"
    );
    assert_eq!((h[0].buffers, h[0].bytes), (1, forgotten.capacity()));
    assert_eq!(h[1].location.line(), shared_line);

    drop(shared);
    assert_eq!(pool.holders().len(), 2, "a view still holds the buffer");
    drop(view);
    assert_eq!(pool.holders().len(), 1, "the last view gave it back");

    std::thread::spawn(move || drop(forgotten)).join().unwrap();
    assert!(pool.holders().is_empty(), "dropped on another thread");

    let detached = pool.get(4096).into_vec();
    assert!(pool.holders().is_empty(), "into_vec: it left the pool");
    drop(detached);
}

#[test]
fn one_get_in_every_is_sampled() {
    let pool = BufferPool::builder().track_holders(8).build().unwrap();
    let held: Vec<_> = (0..800).map(|_| pool.get(512)).collect();
    let h = pool.holders();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].buffers, 100, "one in eight of 800 gets on this thread");
    drop(held);
    assert!(pool.holders().is_empty());
    let off = BufferPool::new();
    let _kept = off.get(512);
    assert!(off.holders().is_empty(), "not tracking by default");
}

#[test]
fn tracking_keeps_the_budget_whole() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 20)
        .track_holders(1)
        .build()
        .unwrap();
    for round in 0..50 {
        let bufs: Vec<_> = (0..4).map(|i| pool.get(1024 << (i + round % 3))).collect();
        let site = pool.holders();
        assert_eq!(site[0].buffers, 4);
        let frozen = pool.get(4096).into_shared();
        drop(bufs);
        drop(frozen);
    }
    let taken = pool
        .try_get(1 << 20)
        .expect("the whole budget is free again");
    assert_eq!(pool.holders()[0].bytes, taken.capacity());
    drop(taken);
    let b = pool.stats().budget.unwrap();
    assert_eq!(b.in_use_bytes, 0, "no charge lost with the tags swapped");
    assert!(pool.holders().is_empty());
}

/// A `tracing` subscriber that hands each event, as text (target, then its fields), to a
/// function: records it, or panics like a buggy subscriber.
struct OnEvent<F>(F);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl<F: Fn(String) + Send + Sync + 'static> tracing::Subscriber for OnEvent<F> {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(format!("{} ", event.metadata().target()));
        event.record(&mut f);
        (self.0)(f.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn a_long_budget_wait_names_who_holds_the_budget() {
    let pool = BufferPool::builder()
        .name("tight")
        .max_in_use_bytes(1 << 20)
        .track_holders(1)
        .report_waits_after(Some(std::time::Duration::from_millis(50)))
        .build()
        .unwrap();
    let (taken_tx, taken_rx) = std::sync::mpsc::channel();
    let holder = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let line = line!() + 1;
            let all = pool.get(1 << 20); // the whole budget
            taken_tx.send(line).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(all);
        })
    };
    let line = taken_rx.recv().unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    let capture = OnEvent(move |e| sink.lock().unwrap().push(e));
    let got = tracing::subscriber::with_default(capture, || pool.get(4096));
    holder.join().unwrap();
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1, "one report per wait: {events:?}");
    let e = &events[0];
    assert!(e.starts_with("tierpool::holders "), "{e}");
    assert!(
        e.contains(&format!("{}:{line}", file!())),
        "names the holder's site: {e}"
    );
    assert!(e.contains("pool=\"tight\""), "{e}");
    assert!(e.contains("requested=4096"), "{e}");
    drop(got);
}

#[test]
fn acquire_names_its_caller_once_with_or_without_a_budget() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for budget in [None, Some(1 << 20)] {
        let mut b = BufferPool::builder().track_holders(1);
        if let Some(limit) = budget {
            b = b.max_in_use_bytes(limit);
        }
        let pool = b.build().unwrap();
        let line = line!() + 1;
        let held = rt.block_on(async { pool.acquire(4096).await.unwrap() });
        let h = pool.holders();
        assert_eq!(h.len(), 1, "{budget:?}: {h:?}");
        assert_eq!(
            (h[0].location.file(), h[0].location.line()),
            (file!(), line)
        );
        assert_eq!(h[0].buffers, 1, "{budget:?}: tracked once");
        drop(held);
        assert!(
            pool.holders().is_empty(),
            "{budget:?}: {:?}",
            pool.holders()
        );
        for _ in 0..100 {
            drop(rt.block_on(pool.acquire(4096)).unwrap());
        }
        assert!(
            pool.holders().is_empty(),
            "{budget:?}: no entry left behind"
        );
    }
}

#[test]
fn each_pool_samples_at_its_own_rate_on_a_shared_thread() {
    let every = BufferPool::builder().track_holders(1).build().unwrap();
    let rare = BufferPool::builder().track_holders(128).build().unwrap();
    let mut kept = Vec::new();
    for _ in 0..64 {
        kept.push(every.get(512));
        kept.push(rare.get(512));
    }
    assert_eq!(
        every.holders()[0].buffers,
        64,
        "track_holders(1): every get"
    );
    assert!(rare.holders().iter().map(|h| h.buffers).sum::<usize>() <= 1);
}

#[test]
fn a_report_that_panics_leaves_the_budget_working() {
    let pool = BufferPool::builder()
        .max_in_use_bytes(1 << 20)
        .track_holders(1)
        .report_waits_after(Some(std::time::Duration::from_millis(20)))
        .build()
        .unwrap();
    let all = pool.get(1 << 20);
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(150));
        drop(all);
    });
    let panicking = OnEvent(|_| panic!("a subscriber's bug"));
    let got = tracing::subscriber::with_default(panicking, || pool.get(4096));
    releaser.join().unwrap();
    drop(got);
    // Nothing stranded: the whole budget can be taken again.
    let again = pool.try_get(1 << 20).expect("the budget is whole");
    drop(again);
}

/// A future is polled only when woken, so an async wait that lasts is reported by the pool's
/// tick while it still waits (here the background trimmer's, every 20 ms): the holder lets go
/// only once the report has arrived, so the test cannot pass by the wait's end. Reported
/// once: the served future does not report again.
#[test]
fn a_long_async_wait_is_reported_by_the_tick_while_it_waits() {
    // The tick runs on the trimmer's thread: a global subscriber, keeping this pool's events.
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = events.clone();
    let capture = OnEvent(move |e: String| {
        if e.contains("pool=\"async-tick\"") {
            sink.lock().unwrap().push(e)
        }
    });
    tracing::subscriber::set_global_default(capture).expect("the only global subscriber");
    let pool = BufferPool::builder()
        .name("async-tick")
        .max_in_use_bytes(1 << 20)
        .track_holders(1)
        .background_trim(true)
        .decay_interval(std::time::Duration::from_millis(20))
        .report_waits_after(Some(std::time::Duration::from_millis(50)))
        .build()
        .unwrap();
    let line = line!() + 1;
    let all = pool.get(1 << 20);
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(pool.acquire(4096)).map(drop)
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while events.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no report while the wait lasted"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(!waiter.is_finished(), "reported while it still waits");
    drop(all);
    waiter.join().unwrap().expect("served");
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1, "one report per wait: {events:?}");
    let e = &events[0];
    assert!(e.starts_with("tierpool::holders "), "{e}");
    assert!(e.contains("waiting=1"), "{e}");
    assert!(e.contains("charge=4096"), "{e}");
    assert!(e.contains(&format!("{}:{line}", file!())), "{e}");
}
