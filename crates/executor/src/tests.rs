use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

/// Occupies every worker of `ex` until the returned sender is dropped (or sent to).
fn hold_workers(ex: &Executor) -> Vec<mpsc::Sender<()>> {
    let (started_tx, started_rx) = mpsc::channel();
    let mut gates = Vec::new();
    for _ in 0..ex.threads() {
        let (tx, rx) = mpsc::channel::<()>();
        let started = started_tx.clone();
        ex.submit(Class::ReadAhead, Blocking::No, move || {
            started.send(()).unwrap();
            let _ = rx.recv();
        });
        gates.push(tx);
    }
    for _ in 0..ex.threads() {
        started_rx.recv_timeout(LONG).expect("a worker started the holding task");
    }
    gates
}

#[test]
fn tasks_start_by_class_then_first_in_first_out() {
    let ex = Executor::new(1);
    let gates = hold_workers(&ex);
    let order = Arc::new(Mutex::new(Vec::new()));
    let pushes = [
        (Class::Store, 0),
        (Class::MountSizing, 1),
        (Class::DeferredStat, 2),
        (Class::ReadAhead, 3),
        (Class::Store, 4),
        (Class::ReadAhead, 5),
        (Class::DeferredStat, 6),
    ];
    for (class, n) in pushes {
        let order = Arc::clone(&order);
        ex.submit(class, Blocking::No, move || lock(&order).push(n));
    }
    drop(gates);
    assert!(ex.wait_idle(LONG));
    assert_eq!(*lock(&order), vec![3, 5, 2, 6, 1, 0, 4]);
}

#[test]
fn a_lower_class_waits_at_most_the_starvation_limit() {
    let ex = Executor::new(1);
    let gates = hold_workers(&ex);
    let order = Arc::new(Mutex::new(Vec::new()));
    {
        let order = Arc::clone(&order);
        ex.submit(Class::DeferredStat, Blocking::No, move || lock(&order).push(usize::MAX));
    }
    let ahead = STARVATION_LIMIT as usize * 3;
    for n in 0..ahead {
        let order = Arc::clone(&order);
        ex.submit(Class::ReadAhead, Blocking::No, move || lock(&order).push(n));
    }
    drop(gates);
    assert!(ex.wait_idle(LONG));
    let order = lock(&order);
    let at = order.iter().position(|&n| n == usize::MAX).unwrap();
    assert_eq!(at, STARVATION_LIMIT as usize, "{order:?}");
}

#[test]
fn workers_are_named_and_started_with_the_executor() {
    let ex = Executor::new(3);
    assert_eq!(ex.workers(), 3);
    let (tx, rx) = mpsc::channel();
    ex.submit(Class::Store, Blocking::No, move || {
        tx.send(std::thread::current().name().map(str::to_owned)).unwrap();
    });
    let name = rx.recv_timeout(LONG).unwrap().unwrap();
    assert!(name.starts_with("topicfs-bg-"), "{name}");
}

#[test]
fn shutdown_drops_queued_tasks_finishes_running_ones_and_joins() {
    let ex = Executor::new(1);
    let (started_tx, started_rx) = mpsc::channel();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let ran = Arc::new(AtomicUsize::new(0));
    {
        let ran = Arc::clone(&ran);
        ex.submit(Class::ReadAhead, Blocking::No, move || {
            started_tx.send(()).unwrap();
            let _ = gate_rx.recv();
            ran.fetch_add(1, Ordering::SeqCst);
        });
    }
    started_rx.recv_timeout(LONG).unwrap();
    let dropped = Arc::new(());
    for _ in 0..5 {
        let (ran, dropped) = (Arc::clone(&ran), Arc::clone(&dropped));
        ex.submit(Class::Store, Blocking::No, move || {
            let _keep = dropped;
            ran.fetch_add(100, Ordering::SeqCst);
        });
    }
    let stopper = {
        let ex = ex.clone();
        std::thread::spawn(move || ex.shutdown())
    };
    // The queued tasks are dropped before the running one ends.
    let deadline = std::time::Instant::now() + LONG;
    while Arc::strong_count(&dropped) > 1 {
        assert!(std::time::Instant::now() < deadline, "queued tasks were not dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    gate_tx.send(()).unwrap();
    stopper.join().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the running task ran");
    assert_eq!(ex.workers(), 0, "every worker ended");
    ex.submit(Class::ReadAhead, Blocking::No, || panic!("runs after shutdown"));
    assert_eq!(ex.waiting(), 0);
}

#[test]
fn a_task_blocked_on_the_network_leaves_the_workers_to_others() {
    let ex = Executor::new(1);
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel();
    ex.submit(Class::ReadAhead, Blocking::Network, move || {
        started_tx.send(()).unwrap();
        let _ = gate_rx.recv();
    });
    started_rx.recv_timeout(LONG).unwrap();
    let (tx, rx) = mpsc::channel();
    ex.submit(Class::ReadAhead, Blocking::No, move || tx.send(()).unwrap());
    rx.recv_timeout(LONG).expect("a task ran while the network task waited");
    drop(gate_tx);
    assert!(ex.wait_idle(LONG));
    // The spare worker ends once the blocking task is over.
    let deadline = std::time::Instant::now() + LONG;
    while ex.workers() > 1 {
        assert!(std::time::Instant::now() < deadline, "{} workers", ex.workers());
        ex.submit(Class::Store, Blocking::No, || {});
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn run_all_returns_every_result_in_order_even_from_inside_a_worker() {
    let ex = Executor::new(1);
    let jobs = |n: usize| -> Vec<Box<dyn FnOnce() -> usize + Send>> {
        (0..n).map(|i| Box::new(move || i * i) as Box<dyn FnOnce() -> usize + Send>).collect()
    };
    assert_eq!(ex.run_all(Class::Store, jobs(10)), (0..10).map(|i| i * i).collect::<Vec<_>>());
    // From the only worker: the caller runs what no worker took.
    let (tx, rx) = mpsc::channel();
    let inner = ex.clone();
    ex.submit(Class::MountSizing, Blocking::No, move || {
        tx.send(inner.run_all(Class::Store, jobs(5))).unwrap();
    });
    assert_eq!(rx.recv_timeout(LONG).unwrap(), vec![0, 1, 4, 9, 16]);
    assert_eq!(ex.run_all(Class::Store, jobs(0)), Vec::<usize>::new());
}

#[test]
fn a_panicking_task_leaves_its_worker_running() {
    let ex = Executor::new(1);
    ex.submit(Class::Store, Blocking::No, || panic!("a failing task"));
    let (tx, rx) = mpsc::channel();
    ex.submit(Class::Store, Blocking::No, move || tx.send(()).unwrap());
    rx.recv_timeout(LONG).expect("the worker survived the panic");
}

#[test]
fn mount_sizing_waits_while_a_higher_class_task_runs_and_then_starts() {
    let ex = Executor::new(2);
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel();
    ex.submit(Class::ReadAhead, Blocking::No, move || {
        started_tx.send(()).unwrap();
        let _ = gate_rx.recv();
    });
    started_rx.recv_timeout(LONG).unwrap();
    assert!(ex.higher_busy(Class::MountSizing));
    let (ran_tx, ran) = mpsc::channel();
    let sizing = ran_tx.clone();
    ex.submit(Class::MountSizing, Blocking::No, move || sizing.send("sizing").unwrap());
    ex.submit(Class::DeferredStat, Blocking::No, move || ran_tx.send("stat").unwrap());
    // The idle worker runs the deferred stat, not the mount sizing.
    assert_eq!(ran.recv_timeout(LONG).unwrap(), "stat");
    assert_eq!(ex.waiting(), 1, "mount sizing waits while read-ahead runs");
    drop(gate_tx);
    assert_eq!(ran.recv_timeout(LONG).unwrap(), "sizing");
}

#[test]
fn network_tasks_run_at_most_network_at_once_and_never_hold_back_local_work() {
    let ex = Executor::with_network(1, 3);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate_rx));
    let (started_tx, started_rx) = mpsc::channel();
    // Three times the bound: a cluster's prefetches of many partitions at once.
    for _ in 0..9 {
        let (running, most, gate, started) =
            (Arc::clone(&running), Arc::clone(&most), Arc::clone(&gate), started_tx.clone());
        ex.submit(Class::ReadAhead, Blocking::Network, move || {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            started.send(()).unwrap();
            let _ = lock(&gate).recv();
            running.fetch_sub(1, Ordering::SeqCst);
        });
    }
    for _ in 0..3 {
        started_rx.recv_timeout(LONG).unwrap();
    }
    // The bound is full and six network tasks wait before it in the same class: a task that
    // does not block still starts.
    let (tx, rx) = mpsc::channel();
    ex.submit(Class::ReadAhead, Blocking::No, move || tx.send(()).unwrap());
    rx.recv_timeout(LONG).expect("local work ran while the network tasks filled the bound");
    assert_eq!(running.load(Ordering::SeqCst), 3);
    assert!(ex.workers() <= ex.threads() + ex.network(), "{} workers", ex.workers());
    // Each network task that ends lets a waiting one start: all nine run, three at a time.
    for _ in 0..9 {
        gate_tx.send(()).unwrap();
    }
    for _ in 0..6 {
        started_rx.recv_timeout(LONG).unwrap();
        assert!(ex.workers() <= ex.threads() + ex.network(), "{} workers", ex.workers());
    }
    assert!(ex.wait_idle(LONG));
    assert_eq!(most.load(Ordering::SeqCst), 3);
}

#[test]
fn a_timed_task_starts_after_its_delay_and_tasks_due_together_in_submission_order() {
    let ex = Executor::new(1);
    let (tx, rx) = mpsc::channel();
    // Each task's start time is its submission time plus its delay (the clock is monotonic, so
    // this holds whatever the machine's load); tasks with the same delay, submitted in order,
    // are due in that order (equal times are ordered by submission).
    let jobs: [(u64, u32); 5] = [(30, 0), (30, 1), (0, 2), (30, 3), (0, 4)];
    for (delay_ms, id) in jobs {
        let tx = tx.clone();
        let submitted = std::time::Instant::now();
        ex.submit_after(Duration::from_millis(delay_ms), Class::Store, Blocking::No, move || {
            tx.send((id, delay_ms, submitted.elapsed())).unwrap();
        });
    }
    let got: Vec<(u32, u64, Duration)> = (0..5).map(|_| rx.recv_timeout(LONG).unwrap()).collect();
    for (id, delay_ms, waited) in &got {
        assert!(*waited >= Duration::from_millis(*delay_ms), "task {id} ran before its time");
    }
    let order =
        |delay: u64| -> Vec<u32> { got.iter().filter(|g| g.1 == delay).map(|g| g.0).collect() };
    assert_eq!(order(30), [0, 1, 3]);
    assert_eq!(order(0), [2, 4]);
}

#[test]
fn shutdown_drops_timed_tasks_unrun() {
    let ex = Executor::new(1);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    ex.submit_after(LONG, Class::Store, Blocking::No, move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    ex.shutdown();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // Dropped at once after shutdown.
    let r = Arc::clone(&ran);
    ex.submit_after(Duration::ZERO, Class::Store, Blocking::No, move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(ex.is_shut_down());
}

#[test]
fn a_periodic_job_runs_again_and_again_never_twice_at_once_until_stopped() {
    let ex = Executor::new(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let (r, i) = (Arc::clone(&runs), Arc::clone(&inside));
    let periodic = ex.every(Duration::ZERO, Duration::from_millis(1), move || {
        assert_eq!(i.fetch_add(1, Ordering::SeqCst), 0, "two runs at once");
        let n = r.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = tx.send(n);
        i.fetch_sub(1, Ordering::SeqCst);
    });
    // Five runs, each queued after the previous one ended.
    while rx.recv_timeout(LONG).unwrap() < 5 {}
    periodic.stop();
    let stopped_at = runs.load(Ordering::SeqCst);
    assert_eq!(inside.load(Ordering::SeqCst), 0, "stop returned while a run was in progress");
    // No run starts after stop: the next one, already queued (1 ms after the last), finds it
    // stopped. A task queued 50 ms later runs after it (start order) on the one Store queue.
    let (later_tx, later_rx) = mpsc::channel();
    ex.submit_after(Duration::from_millis(50), Class::Store, Blocking::No, move || {
        later_tx.send(()).unwrap();
    });
    later_rx.recv_timeout(LONG).unwrap();
    assert!(ex.wait_idle(LONG));
    assert_eq!(runs.load(Ordering::SeqCst), stopped_at);
}

#[test]
fn stop_waits_for_the_run_in_progress_and_a_panic_does_not_end_the_job() {
    let ex = Executor::new(1);
    let (started_tx, started_rx) = mpsc::channel();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate_rx = Mutex::new(gate_rx);
    let ended = Arc::new(AtomicUsize::new(0));
    let e = Arc::clone(&ended);
    let mut first = true;
    let periodic = ex.every(Duration::ZERO, Duration::ZERO, move || {
        if std::mem::take(&mut first) {
            panic!("the first run panics");
        }
        started_tx.send(()).unwrap();
        let _ = lock(&gate_rx).recv();
        e.fetch_add(1, Ordering::SeqCst);
    });
    started_rx.recv_timeout(LONG).expect("a run after the panicking one");
    let stopper = std::thread::spawn(move || {
        periodic.stop();
    });
    // While the run waits at its gate, a local task still finds a worker: the run is long.
    let (local_tx, local_rx) = mpsc::channel();
    ex.submit(Class::ReadAhead, Blocking::No, move || local_tx.send(()).unwrap());
    local_rx.recv_timeout(LONG).expect("a local task ran beside the long periodic run");
    gate_tx.send(()).unwrap();
    stopper.join().unwrap();
    assert_eq!(ended.load(Ordering::SeqCst), 1, "stop returned after the run ended");
}

#[test]
fn dedicated_threads_are_counted_while_they_live() {
    let before = dedicated_threads();
    let (tx, rx) = mpsc::channel::<()>();
    let handle = spawn_dedicated("test-dedicated".into(), move || {
        let _ = rx.recv();
    })
    .unwrap();
    assert_eq!(handle.thread().name(), Some("test-dedicated"));
    assert!(dedicated_threads() > before);
    drop(tx);
    handle.join().unwrap();
}
