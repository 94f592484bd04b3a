//! The request hook with Rust closures, against the fault server's /auth route (401 until
//! the bearer token is its current one).
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use pixload::{HookCall, Loader, Queue, Request, Status};

struct Fault {
    base: String,
    port: u16,
    _child: Mutex<Child>,
}

static FAULT: OnceLock<Fault> = OnceLock::new();

extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
    fn kill(pid: i32, signal: i32) -> i32;
}

/// Stops the fault server this process started, by its pid (SIGTERM).
extern "C" fn stop_fault() {
    if let Some(fault) = FAULT.get() {
        let pid = fault._child.lock().map(|c| c.id()).unwrap_or(0);
        if pid > 0 {
            unsafe { kill(pid as i32, 15) };
        }
    }
}

/// The fault server serving the fixtures (it ends itself after its lifetime).
fn fault() -> &'static Fault {
    FAULT.get_or_init(|| {
        let www = &common::server().www;
        let mut child = Command::new("python3")
            .arg(common::repo_root().join("Tests/faultserver/faultserver.py"))
            .arg("--www")
            .arg(www)
            .args(["--lifetime", "300"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.split("http=").nth(1).and_then(|s| s.split(' ').next()).and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the fault server did not start: {line:?}"));
        unsafe { atexit(stop_fault) };
        Fault { base: format!("http://127.0.0.1:{port}"), port, _child: Mutex::new(child) }
    })
}

impl Fault {
    fn get(&self, target: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        // The server keeps control connections open: read the head, then Content-Length bytes.
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length: ") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        String::from_utf8(body).unwrap()
    }

    fn set_token(&self, realm: &str, token: &str) {
        assert_eq!(self.get(&format!("/__token?realm={realm}&token={token}")), "token set\n");
    }

    /// The Authorization values of the requests for url, in order.
    fn authorizations(&self, url: &str) -> Vec<String> {
        let target = &url[self.base.len()..];
        let encoded: String = target
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        let text = self.get(&format!("/__stats?uri={encoded}"));
        let requests: usize = text.lines().next().and_then(|l| l.strip_prefix("requests ")).unwrap().parse().unwrap();
        let mut values = vec![String::new(); requests];
        for line in text.lines().filter_map(|l| l.strip_prefix("header ")) {
            let (index, header) = line.split_once(' ').unwrap();
            if let Some(value) = header.strip_prefix("Authorization: ") {
                values[index.parse::<usize>().unwrap()] = value.to_string();
            }
        }
        values
    }
}

/// The host's token service: answers at once with its token; on a 401 with that token
/// keeps the call while one refresh runs on a thread of its own (a round trip to the
/// server, which issues the new token), then answers every kept call.
struct TokenService {
    realm: String,
    state: Mutex<ServiceState>,
    refreshes: AtomicUsize,
    calls: AtomicUsize,
}

struct ServiceState {
    token: String,
    refreshing: bool,
    kept: Vec<HookCall>,
}

impl TokenService {
    fn hook(self: &Arc<Self>, call: HookCall) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut state = self.state.lock().unwrap();
        let refused = call.headers().iter().find_map(|h| h.strip_prefix("Authorization: Bearer ")).unwrap_or("");
        let expired = call.status() == 401 && refused == state.token;
        if state.refreshing || expired {
            state.kept.push(call);
            if !state.refreshing {
                state.refreshing = true;
                let n = self.refreshes.fetch_add(1, Ordering::SeqCst) + 1;
                let service = self.clone();
                std::thread::spawn(move || service.refresh(n));
            }
            return;
        }
        let line = format!("Authorization: Bearer {}", state.token);
        drop(state);
        call.answer(&[line]).unwrap();
    }

    fn refresh(&self, n: usize) {
        let token = format!("{}-secret-{n}", self.realm);
        fault().set_token(&self.realm, &token);
        let kept = {
            let mut state = self.state.lock().unwrap();
            state.token = token.clone();
            state.refreshing = false;
            std::mem::take(&mut state.kept)
        };
        for call in kept {
            assert_eq!(call.answer(&[format!("Authorization: Bearer {token}")]), Ok(true));
        }
    }
}

#[test]
fn one_refresh_for_fifty_requests_and_the_cache_outlives_the_token() {
    let fault = fault();
    let realm = format!("rs{}", std::process::id());
    fault.set_token(&realm, "first-secret");
    let service = Arc::new(TokenService {
        realm: realm.clone(),
        state: Mutex::new(ServiceState { token: "first-secret".into(), refreshing: false, kept: Vec::new() }),
        refreshes: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
    });
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let hooked = service.clone();
    let logged = lines.clone();
    let loader = Loader::builder()
        .request_hook(move |call| hooked.hook(call))
        .log(move |_, line| logged.lock().unwrap().push(line.to_string()))
        .log_level(pixload::LogLevel::Info)
        .max_retries(0)
        .build()
        .unwrap();
    let first = format!("{}/auth/realm={realm}?case=first", fault.base);
    loader.fetch(&Request::new(&first).size(64, 64)).unwrap();
    assert_eq!(fault.authorizations(&first), ["Bearer first-secret"]);

    fault.set_token(&realm, "rotated-elsewhere");
    let queue = Queue::new().unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    let urls: Vec<String> = (0..50).map(|i| format!("{}/auth/realm={realm}?case=many-{i}", fault.base)).collect();
    for url in &urls {
        let results = results.clone();
        loader
            .load_measured(&Request::new(url).size(32, 32), &queue, move |r, metrics| {
                let secret_in_metrics = format!("{metrics:?}").contains("secret");
                results.lock().unwrap().push((r.map(|_| ()).map_err(|e| e.to_string()), secret_in_metrics))
            })
            .unwrap();
    }
    common::drain_until(&queue, Duration::from_secs(30), || results.lock().unwrap().len() == 50);
    for (result, secret_in_metrics) in results.lock().unwrap().iter() {
        assert_eq!(result, &Ok(()));
        assert!(!secret_in_metrics);
    }
    assert_eq!(service.refreshes.load(Ordering::SeqCst), 1);
    for url in &urls {
        let seen = fault.authorizations(url);
        assert!((1..=2).contains(&seen.len()), "{url}: {seen:?}");
        assert_eq!(seen.last().unwrap(), &format!("Bearer {realm}-secret-1"));
    }
    // Cached under the old token: still served, with no hook call and no request.
    let calls = service.calls.load(Ordering::SeqCst);
    assert!(loader.lookup(&Request::new(&first).size(64, 64)).unwrap().is_some());
    loader.fetch(&Request::new(&first).size(64, 64)).unwrap();
    assert_eq!(service.calls.load(Ordering::SeqCst), calls);
    assert_eq!(fault.authorizations(&first).len(), 1);
    drop(loader);
    assert!(lines.lock().unwrap().iter().all(|line| !line.contains("secret")));
}

#[test]
fn every_hop_failures_and_timeouts() {
    let fault = fault();
    let realm = format!("rsh{}", std::process::id());
    fault.set_token(&realm, "hop-secret");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let loader = Loader::builder()
        .request_hook(move |call| {
            record.lock().unwrap().push((call.url().to_string(), call.status()));
            call.answer(&["Authorization: Bearer hop-secret"]).unwrap();
        })
        .build()
        .unwrap();
    let url = format!("{}/go/to=%2Fauth%2Frealm%3D{realm}?case=hops", fault.base);
    loader.fetch(&Request::new(&url)).unwrap();
    let second = format!("{}/auth/realm={realm}?case=hops", fault.base);
    assert_eq!(*seen.lock().unwrap(), [(url, 0), (second.clone(), 0)]);
    assert_eq!(fault.authorizations(&second), ["Bearer hop-secret"]);
    drop(loader);

    // A failing hook ends the request with its status; the server never hears of it.
    let loader = Loader::builder().request_hook(|call| { call.fail(Status::NotFound, "signed out"); }).build().unwrap();
    let failed = format!("{}/auth/realm={realm}?case=fail", fault.base);
    let error = loader.fetch(&Request::new(&failed)).unwrap_err();
    assert_eq!(error.status(), Status::NotFound);
    assert!(error.message().contains("signed out"));
    assert!(fault.authorizations(&failed).is_empty());
    drop(loader);

    // A hook that keeps its calls: PXL_E_TIMEOUT after hook_timeout; the late answer does nothing.
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keep = kept.clone();
    let loader = Loader::builder()
        .request_hook(move |call| keep.lock().unwrap().push(call))
        .hook_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let error = loader.fetch(&Request::new(&format!("{}/image?case=silent", fault.base))).unwrap_err();
    assert_eq!(error.status(), Status::Timeout);
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    let call = kept.lock().unwrap().pop().unwrap();
    assert_eq!(call.answer::<&str>(&[]), Ok(false));
    drop(loader);

    // A loader dropped while its hook holds calls: they end cancelled, and answering later is harmless.
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keep = kept.clone();
    let loader = Loader::builder().request_hook(move |call| keep.lock().unwrap().push(call)).build().unwrap();
    let queue = Queue::new().unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    let out = results.clone();
    loader
        .load(&Request::new(&format!("{}/image?case=dropped", fault.base)), &queue, move |r| {
            out.lock().unwrap().push(r.map(|_| ()).map_err(|e| e.status()))
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while kept.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(loader);
    common::drain_until(&queue, Duration::from_secs(5), || !results.lock().unwrap().is_empty());
    assert_eq!(*results.lock().unwrap(), [Err(Status::Cancelled)]);
    let call = kept.lock().unwrap().pop().unwrap();
    assert!(!call.fail(Status::Io, "too late"));
}
