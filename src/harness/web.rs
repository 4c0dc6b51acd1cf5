//! `kernbench web`: a local web UI over the harness (ADR-0018).
//!
//! An HTTP/1.x server of its own (`web::http`, ADR-0109): connections are
//! tasks on one event-loop thread, a request body is never held (413 over
//! `http::MAX_BODY`), pages are rendered on a small pool, and runs
//! (`/run`, `/trace`) go through a queue of [`RUNS_AT_ONCE`] running and
//! [`RUNS_WAITING`] waiting (503 "busy" past it), so a long run never
//! holds up `/topology.svg` or another page (ADR-0030). Runs are bounded:
//! at most [`MAX_POINTS`] points, a data check of at most
//! [`MAX_DATA_BYTES`] (estimated before anything runs), and
//! [`Limits::run_time`] of wall time, after which the simulation is
//! cancelled through [`crate::sim::cancel`] and the page says so. A
//! `/run` page is streamed: a progress line as points finish and every
//! few seconds, then the results.
//!
//! - `/`: the machine summary and drawing, a form that runs a workload or
//!   a small sweep, and the report of a result folder if one was given
//!   (rendered by [`report`], as `kernbench report` renders it).
//! - `/run?QUERY`: the form's sweep, planned and run by [`sweep`] exactly as
//!   `kernbench sweep` runs it (each point its own machine and simulation
//!   on a worker thread), shown as the nccl-tests table and the figures.
//! - `/trace?QUERY`: the first point of that sweep run again on a run
//!   thread with a Chrome/Perfetto trace layer written to a temporary
//!   file, sent as a download and deleted.
//! - `/topology.svg`: the machine drawn from [`Machine`]: SIPs in their
//!   grid with the inter-SIP links and the host's PCIe links, inside each
//!   the cube mesh with its UCIe links; `/cube.svg`: one cube's NoC
//!   routers, what each carries and the NoC links.
//!
//! A query the form cannot have produced, or a sweep over
//! [`MAX_POINTS`] points, is an HTML page with the error and status 400;
//! a point that fails is a row with its reason, as in `sweep`.
//!
//! Knows the harness, the workload registry and the machine; nothing of the
//! command line.

use std::fmt::Write;
use std::fs::File;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing_subscriber::layer::SubscriberExt;

use super::figures;
use super::heat::{self, EdgeHeat, Heat};
use super::report::{self, escape};
use super::results::{ResultSet, Source};
use super::sweep::{self, Axis, Plan, Variant};
use super::watch;
use crate::ccl::CclConfig;
use crate::topology::naming::Side;
use crate::topology::{
    CubeLayout, EdgeKind, Fidelity, GridPos, Machine, NodeKind, Slot, TopologySpec,
};
use crate::trace::ChromeTraceLayer;
use crate::workloads::{self, ByteSize};

mod http;

/// The most points one `/run` may simulate: the page is for small sweeps;
/// bigger ones belong to `kernbench sweep --out` and `--results`.
pub const MAX_POINTS: usize = 64;

/// Runs (`/run`, `/trace`) simulated at once; each has its own thread.
pub const RUNS_AT_ONCE: usize = 4;

/// Runs admitted beyond those, waiting for a slot; one more is a 503
/// "busy" page.
pub const RUNS_WAITING: usize = 8;

/// Threads rendering pages (`/`, errors); pictures are sent from memory.
const PAGE_THREADS: usize = 4;

/// Connections open at once; one more is closed unanswered. An idle one
/// costs a task and its buffer, not a thread, and is closed after
/// `http::HEAD_TIME` without a whole head.
pub const MAX_CONNECTIONS: usize = 512;

/// The most bytes one `/run` with the data check may keep: the estimate is
/// every point's size × ranks × 4 (inputs, outputs, references, slots).
pub const MAX_DATA_BYTES: u64 = 1 << 30;

/// The wall-time bound of one request's simulations.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a `/run` or `/trace` may simulate before it is cancelled.
    pub run_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            run_time: Duration::from_secs(60),
        }
    }
}

/// What the server serves: the configuration every run starts from and the
/// results shown on `/`.
pub struct Settings {
    /// The machine (`--topology`, `--set`); the form may change its fidelity.
    pub topology: TopologySpec,
    /// The collectives' configuration.
    pub ccl: CclConfig,
    /// The result set shown on `/` (`--results DIR`).
    pub results: Option<ResultSet>,
    /// The bounds of a request's runs.
    pub limits: Limits,
    /// The folder the form's file fields (`msccl-xml`, `et`, ...) may name
    /// files in (`--inputs DIR`, else the `--results` folder); `None`:
    /// they may name none.
    pub inputs: Option<std::path::PathBuf>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server's event loop could not be made.
    #[error("cannot start the web server: {0}")]
    Runtime(std::io::Error),
    /// The machine of the settings cannot be built.
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
}

/// A bound server.
pub struct Server {
    listener: std::net::TcpListener,
    settings: Settings,
    /// The machine's drawings, made once (`/topology.svg`, `/cube.svg`).
    topology_svg: String,
    cube_svg: String,
    /// The machine's SIP count, for the data estimate.
    sips: u64,
    traces: AtomicU64,
}

/// What a request gets.
enum Reply {
    /// An HTML page with its status.
    Html(u16, String),
    /// An SVG image.
    Svg(String),
    /// A traced run of the first point (`/trace`).
    Trace(Plan),
    /// A run, streamed as it goes.
    Run(Plan, String),
}

/// The bounds of the runs in flight: admitted (running or waiting) and
/// running.
struct Runs {
    admitted: Semaphore,
    running: Arc<Semaphore>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port).
    pub fn bind(addr: SocketAddr, settings: Settings) -> Result<Server, WebError> {
        let machine = Machine::build(&settings.topology)?;
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| WebError::Bind { addr, source })?;
        Ok(Server {
            listener,
            settings,
            topology_svg: topology_svg(&machine),
            cube_svg: cube_svg(&machine),
            sips: u64::from(machine.sip_count()),
            traces: AtomicU64::new(0),
        })
    }

    /// The URL of `/`, with the port actually bound.
    pub fn url(&self) -> String {
        match self.listener.local_addr() {
            Ok(addr) => format!("http://{addr}/"),
            Err(_) => "http://localhost/".to_owned(),
        }
    }

    /// Answers requests until the process ends: connections on one event
    /// loop thread, pages and runs on a bounded pool (ADR-0109).
    pub fn run(self) -> Result<(), WebError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(RUNS_AT_ONCE + PAGE_THREADS)
            .build()
            .map_err(WebError::Runtime)?;
        runtime.block_on(async move {
            let listener =
                TcpListener::from_std(self.listener.try_clone().map_err(WebError::Runtime)?)
                    .map_err(WebError::Runtime)?;
            let server = Arc::new(self);
            let runs = Arc::new(Runs {
                admitted: Semaphore::new(RUNS_AT_ONCE + RUNS_WAITING),
                running: Arc::new(Semaphore::new(RUNS_AT_ONCE)),
            });
            let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // Out of descriptors, say: let connections close.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let Ok(permit) = open.clone().try_acquire_owned() else {
                    continue;
                };
                let (server, runs) = (server.clone(), runs.clone());
                tokio::spawn(async move {
                    server.answer(stream, &runs).await;
                    drop(permit);
                });
            }
        })
    }

    /// Answers one connection's request.
    async fn answer(self: Arc<Self>, mut stream: TcpStream, runs: &Runs) {
        let target = match http::read_request(&mut stream).await {
            Ok(Some(request)) => request.target,
            Ok(None) => return,
            Err(refusal) => {
                let page = error_page(refusal.status, &refusal.message);
                return http::respond(stream, refusal.status, HTML, page.as_bytes()).await;
            }
        };
        let server = self.clone();
        let Ok(reply) = tokio::task::spawn_blocking(move || server.reply(&target)).await else {
            return;
        };
        match reply {
            Reply::Html(status, html) => http::respond(stream, status, HTML, html.as_bytes()).await,
            Reply::Svg(svg) => http::respond(stream, 200, "image/svg+xml", svg.as_bytes()).await,
            Reply::Run(..) | Reply::Trace(_) => {
                let Ok(_admitted) = runs.admitted.try_acquire() else {
                    let page = error_page(503, &busy_message());
                    return http::respond(stream, 503, HTML, page.as_bytes()).await;
                };
                self.queued_run(stream, reply, &runs.running).await;
            }
        }
    }

    /// The reply to `url` (path and query).
    fn reply(&self, url: &str) -> Reply {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let outcome = match path {
            "/" => Ok(Reply::Html(200, self.home())),
            "/run" => self
                .checked_plan(query)
                .map(|plan| Reply::Run(plan, query.to_owned())),
            "/trace" => self.plan(query).map(Reply::Trace),
            "/topology.svg" => Ok(Reply::Svg(self.topology_svg.clone())),
            "/cube.svg" => Ok(Reply::Svg(self.cube_svg.clone())),
            _ => {
                let body = format!("<h1>Not found</h1>\n<p>{}</p>\n", escape(path));
                Ok(Reply::Html(404, with_nav("not found", &body)))
            }
        };
        outcome.unwrap_or_else(|message| Reply::Html(400, error_page(400, &message)))
    }

    /// A run admitted to the queue: waits for a slot (the page says so if
    /// it has to), then runs on its own thread, the slot held until the
    /// simulation ends even if the client has gone.
    async fn queued_run(
        self: Arc<Self>,
        mut stream: TcpStream,
        reply: Reply,
        running: &Arc<Semaphore>,
    ) {
        let waiting = running.clone().try_acquire_owned();
        let Reply::Run(plan, query) = reply else {
            let Reply::Trace(plan) = reply else { return };
            let Ok(slot) = running.clone().acquire_owned().await else {
                return;
            };
            return self.send_trace(stream, plan, slot).await;
        };
        let head = http::reply_head(200, HTML, None, "");
        let mut page = head + &run_head(&plan, self.settings.limits.run_time);
        if waiting.is_err() {
            let _ = writeln!(
                page,
                "<p class=\"progress\" id=\"queued\">waiting for a run slot ({RUNS_AT_ONCE} run at once) ...</p>"
            );
        }
        if stream.write_all(page.as_bytes()).await.is_err() {
            return;
        }
        let slot = match waiting {
            Ok(slot) => slot,
            Err(_) => match running.clone().acquire_owned().await {
                Ok(slot) => slot,
                Err(_) => return,
            },
        };
        let (send, mut pieces) = tokio::sync::mpsc::unbounded_channel::<String>();
        tokio::task::spawn_blocking(move || {
            self.run_page(&plan, &query, &mut |text| {
                let _ = send.send(text);
            });
            drop(slot);
        });
        while let Some(text) = pieces.recv().await {
            if stream.write_all(text.as_bytes()).await.is_err() {
                return;
            }
        }
        http::close(stream).await;
    }

    /// `/trace`: the first point of `plan` traced on its own thread in
    /// `slot`, sent as a download, or the page saying why not.
    async fn send_trace(
        self: Arc<Self>,
        stream: TcpStream,
        plan: Plan,
        slot: OwnedSemaphorePermit,
    ) {
        let traced = tokio::task::spawn_blocking(move || {
            let file = self.trace(&plan);
            drop(slot);
            file
        });
        let file = match traced.await {
            Ok(Ok(file)) => file,
            Ok(Err(message)) => {
                let page = error_page(400, &message);
                return http::respond(stream, 400, HTML, page.as_bytes()).await;
            }
            Err(_) => return,
        };
        let length = file.metadata().map(|m| m.len()).ok();
        let head = http::reply_head(
            200,
            "application/json",
            length,
            "Content-Disposition: attachment; filename=\"kernbench-trace.json\"\r\n",
        );
        let mut stream = stream;
        let mut file = tokio::fs::File::from_std(file);
        if stream.write_all(head.as_bytes()).await.is_ok()
            && tokio::io::copy(&mut file, &mut stream).await.is_ok()
        {
            http::close(stream).await;
        }
    }

    /// `/`: the machine, the form and the results.
    fn home(&self) -> String {
        let mut body = String::from("<h1>kernbench</h1>\n<h2>Machine</h2>\n");
        let _ = writeln!(
            body,
            "<pre>{}</pre>\n<p><a href=\"/topology.svg\"><img src=\"/topology.svg\" \
             alt=\"the machine: SIPs and their cube meshes\" style=\"max-width:100%\"></a></p>\n\
             <p><a href=\"/cube.svg\"><img src=\"/cube.svg\" \
             alt=\"one cube: its NoC routers and what they carry\" style=\"max-width:100%\"></a></p>",
            escape(&self.settings.topology.summary().to_string())
        );
        body += &form();
        if let Some(set) = &self.settings.results {
            body += "<h2>Results</h2>\n";
            let topology = &self.settings.topology;
            let machine_of =
                |source: &_, row: &_| report::machine_for_row(topology, None, source, row);
            body += &report::report_body(set, None, &figures::of_set(set), Some(&machine_of));
        }
        with_nav("kernbench", &body)
    }

    /// The sweep of `query`, refused up front when it is over the point
    /// limit or its data check would keep more than [`MAX_DATA_BYTES`].
    fn checked_plan(&self, query: &str) -> Result<Plan, String> {
        let plan = self.plan(query)?;
        plan.check_sizes().map_err(|e| e.to_string())?;
        let points = plan.points();
        if points.len() > MAX_POINTS {
            return Err(format!(
                "{} points asked; the web form runs at most {MAX_POINTS} (use `kernbench sweep --out DIR` and `kernbench web --results DIR`)",
                points.len()
            ));
        }
        if plan.verify_data {
            let estimate = data_estimate(&points, self.sips);
            if estimate > MAX_DATA_BYTES {
                return Err(format!(
                    "the data check of these points would keep about {} MiB (size x {} ranks x 4 per point); \
                     the web form checks data up to {} MiB: use smaller sizes, or `kernbench sweep --verify-data`",
                    estimate >> 20,
                    self.sips,
                    MAX_DATA_BYTES >> 20
                ));
            }
        }
        Ok(plan)
    }

    /// The rest of the page of `/run` (after [`run_head`]), sent in pieces
    /// to `send` as the run goes.
    fn run_page(&self, plan: &Plan, query: &str, send: &mut dyn FnMut(String)) {
        let tail = page_tail();
        let points = plan.points();
        let limit = self.settings.limits.run_time;
        let jobs = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let every = PROGRESS_EVERY;
        let outcome = watch::sweep(
            plan,
            &points,
            jobs,
            Some(limit),
            every,
            &mut |done, elapsed| {
                send(format!(
                    "<p class=\"progress\">{done} of {} point(s) done ({:.1} s)</p>\n",
                    points.len(),
                    elapsed.as_secs_f64()
                ));
            },
        );
        let mut body = outcome_notes(&outcome, limit, points.len());
        let source = Source {
            command: format!("kernbench web: /run?{query}"),
            sweep: format!("/run?{query}"),
            config: String::new(),
            machine: self.settings.topology.summary().to_string(),
            shard: None,
            varied: Vec::new(),
        };
        let set = ResultSet::new(source, outcome.rows);
        let _ = writeln!(
            body,
            "<p><a id=\"trace\" href=\"/trace?{}\" download>Perfetto trace of the first run</a> \
             (open it in ui.perfetto.dev; at most {} MiB: a longer trace is cut there, the run \
             stopped; `kernbench --trace FILE run ...` writes it whole)</p>",
            escape(query),
            MAX_TRACE_BYTES >> 20
        );
        // The page's runs are all on the server's machine.
        let machine_of = |_: &_, _: &_| {
            Machine::build(&self.settings.topology).map_err(|error| error.to_string())
        };
        let machine_of: report::MachineOf<'_> = &machine_of;
        body += &report::report_body(&set, None, &figures::of_set(&set), Some(machine_of));
        send(body + &tail);
    }

    /// `/trace`: the first point of the form's sweep, traced.
    fn trace(&self, plan: &Plan) -> Result<File, String> {
        let point = plan.points().into_iter().next().ok_or("no point to run")?;
        let number = self.traces.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "kernbench-web-{}-{number}.json",
            std::process::id()
        ));
        let limit = self.settings.limits.run_time;
        let outcome = traced_run(plan, &point, &path, limit);
        let file = outcome.and_then(|()| File::open(&path).map_err(|e| e.to_string()));
        // Unlinked now, the file lives until the response has read it.
        let _ = std::fs::remove_file(&path);
        file
    }

    /// The sweep `query` asks for.
    fn plan(&self, query: &str) -> Result<Plan, String> {
        let mut form = Form::parse(query)?;
        let workload = workloads::find(&form.bench).map_err(|e| e.to_string())?;
        self.confine_files(&mut form.axes)?;
        let variants = self.variants(&form.fidelities)?;
        Plan::new(workload, variants, form.axes, form.verify_data)
            .map(|plan| plan.explained(form.explain))
            .map_err(|e| e.to_string())
    }

    /// Every value of a file field (a parameter taking a `FILE` or
    /// `PREFIX`) made a path inside [`Settings::inputs`] (a relative one
    /// is taken from there), or refused naming the path and the folder.
    fn confine_files(&self, axes: &mut [Axis]) -> Result<(), String> {
        let params = workloads::all_params();
        for axis in axes {
            let Some((param, _)) = params.get(axis.name.as_str()) else {
                continue;
            };
            if !matches!(param.value_name, "FILE" | "PREFIX") {
                continue;
            }
            for value in &mut axis.values {
                *value = confined(self.settings.inputs.as_deref(), &axis.name, value)?;
            }
        }
        Ok(())
    }

    /// One variant per fidelity asked for (the configured machine if none).
    fn variants(&self, fidelities: &[String]) -> Result<Vec<Variant>, String> {
        let variant = |fields, topology| Variant {
            fields,
            topology,
            ccl: self.settings.ccl.clone(),
        };
        if fidelities.is_empty() {
            return Ok(vec![variant(Vec::new(), self.settings.topology.clone())]);
        }
        fidelities
            .iter()
            .map(|name| {
                let fidelity = Fidelity::ALL
                    .into_iter()
                    .find(|f| f.name() == name)
                    .ok_or_else(|| format!("fidelity `{name}`: expected packet or flow"))?;
                let topology = self.settings.topology.clone().with_fidelity(fidelity);
                let fields = vec![("fidelity".to_owned(), name.clone())];
                Ok(variant(fields, topology))
            })
            .collect()
    }
}

/// `value` of the file field `name` as a path in the folder `inputs`
/// (canonical): its folder must resolve (links and `..` followed) inside
/// `inputs`, and so must the file itself if it exists.
fn confined(inputs: Option<&std::path::Path>, name: &str, value: &str) -> Result<String, String> {
    let Some(inputs) = inputs else {
        return Err(format!(
            "{name} {value}: the web form opens no files (start it with --inputs DIR, or \
             --results DIR, to allow that folder)"
        ));
    };
    let outside = || {
        format!(
            "{name} {value}: outside {}, the only folder the web form opens files in \
             (kernbench web --inputs DIR)",
            inputs.display()
        )
    };
    let path = inputs.join(value);
    let file = path.file_name().ok_or_else(outside)?;
    let folder = path.parent().ok_or_else(outside)?;
    let folder = folder.canonicalize().map_err(|_| outside())?;
    let joined = folder.join(file);
    let real = joined.canonicalize().unwrap_or_else(|_| joined.clone());
    match folder.starts_with(inputs) && real.starts_with(inputs) {
        true => Ok(joined.display().to_string()),
        false => Err(outside()),
    }
}

/// The run page's notes on a sweep's outcome: stopped at the limit,
/// failed points (`points` in all).
fn outcome_notes(outcome: &watch::Watched, limit: Duration, points: usize) -> String {
    let mut body = String::new();
    if outcome.stopped {
        let finished = outcome
            .rows
            .iter()
            .filter(|r| !sweep::was_cancelled(r))
            .count();
        let _ = writeln!(
            body,
            "<p class=\"error\" id=\"limit\">stopped at the limit of {} s: {} of {} point(s) \
             finished; the others are rows saying so. Longer runs belong to `kernbench sweep`.</p>",
            limit.as_secs(),
            finished,
            points
        );
    }
    let failed = outcome
        .rows
        .iter()
        .filter(|r| r.error.is_some() || r.checks_failed > 0)
        .count();
    if failed > 0 {
        let _ = writeln!(
            body,
            "<p class=\"error\" id=\"failed\">{failed} of {} point(s) failed (an error or a \
             failed check): `kernbench sweep` exits non-zero on this.</p>",
            points
        );
    }
    body
}

/// How often a long run reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What the data check of `points` keeps, roughly: each point's size ×
/// `ranks` × 4 (inputs, outputs, references, slots), summed.
fn data_estimate(points: &[sweep::Point], ranks: u64) -> u64 {
    points
        .iter()
        .filter_map(|p| p.fields.iter().find(|(n, _)| n == "size"))
        .filter_map(|(_, v)| v.parse::<ByteSize>().ok())
        .map(|size| size.0.saturating_mul(ranks).saturating_mul(4))
        .fold(0u64, u64::saturating_add)
}

/// Runs `point` in this thread with a trace layer writing to `path`,
/// cancelled after `limit`.
fn traced_run(
    plan: &Plan,
    point: &sweep::Point,
    path: &std::path::Path,
    limit: Duration,
) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("trace file {}: {e}", path.display());
    let (layer, guard) = ChromeTraceLayer::to_file(path).map_err(cannot)?;
    let subscriber = tracing_subscriber::registry().with(layer);
    let cancel = Arc::new(AtomicBool::new(false));
    let cut = AtomicBool::new(false);
    let (finished, wait) = mpsc::channel::<()>();
    let row = std::thread::scope(|scope| {
        let (cancel, cut) = (&cancel, &cut);
        scope.spawn(move || {
            let stop = watch_trace(&wait, path, limit);
            cut.store(stop == Some(TraceStop::Cap), Ordering::Relaxed);
            if stop.is_some() {
                cancel.store(true, Ordering::Relaxed);
            }
        });
        let row = tracing::subscriber::with_default(subscriber, || {
            crate::sim::cancel::with_cancel(cancel.clone(), || plan.run_point(point))
        });
        let _ = finished.send(());
        row
    });
    guard.finish().map_err(cannot)?;
    match row.error {
        // Cut at the cap: the trace of the run so far, closed and whole.
        Some(_) if cut.load(Ordering::Relaxed) => Ok(()),
        Some(error) => Err(format!("the first run failed: {error}")),
        None => Ok(()),
    }
}

/// The most bytes of a `/trace` file: a run whose trace passes it is
/// stopped there and its trace so far sent (said on the run page).
pub const MAX_TRACE_BYTES: u64 = 64 << 20;

/// Why a traced run is stopped.
#[derive(Debug, PartialEq)]
enum TraceStop {
    /// Its wall-time limit.
    Limit,
    /// Its trace reached [`MAX_TRACE_BYTES`].
    Cap,
}

/// Waits for the traced run to finish (`wait`), checking its trace file
/// at `path` every 10 ms: why to stop it, if it must be.
fn watch_trace(
    wait: &mpsc::Receiver<()>,
    path: &std::path::Path,
    limit: Duration,
) -> Option<TraceStop> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if wait.recv_timeout(Duration::from_millis(10)) != Err(mpsc::RecvTimeoutError::Timeout) {
            return None;
        }
        if std::fs::metadata(path).is_ok_and(|m| m.len() >= MAX_TRACE_BYTES) {
            return Some(TraceStop::Cap);
        }
        if std::time::Instant::now() >= deadline {
            return Some(TraceStop::Limit);
        }
    }
}

/// The form's fields, as `/run` and `/trace` receive them.
#[derive(Debug, PartialEq)]
struct Form {
    bench: String,
    fidelities: Vec<String>,
    axes: Vec<Axis>,
    verify_data: bool,
    explain: bool,
}

impl Form {
    /// The fields of `query`. Empty fields are left out; a field may be
    /// repeated and holds comma-separated values; `b`, `e`, `f` are
    /// nccl-tests' size flags and replace `size`.
    fn parse(query: &str) -> Result<Form, String> {
        let params = workloads::all_params();
        let mut bench = None;
        let mut fidelities = Vec::new();
        let mut verify_data = false;
        let mut explain = false;
        let mut axes: Vec<Axis> = Vec::new();
        let mut range: [Option<String>; 3] = Default::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let values = || {
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            };
            match key.as_ref() {
                _ if value.trim().is_empty() => {}
                "bench" => bench = Some(value.trim().to_owned()),
                "fidelity" => fidelities.extend(values()),
                "verify_data" => verify_data = true,
                "explain" => explain = true,
                "b" => range[0] = Some(value.trim().to_owned()),
                "e" => range[1] = Some(value.trim().to_owned()),
                "f" => range[2] = Some(value.trim().to_owned()),
                name if params.contains_key(name) => {
                    match axes.iter_mut().find(|a| a.name == name) {
                        Some(axis) => axis.values.extend(values()),
                        None => axes.push(Axis {
                            name: name.to_owned(),
                            values: values().collect(),
                        }),
                    }
                }
                other => return Err(format!("unknown field `{other}`")),
            }
        }
        if let Some(sizes) = size_range(range)? {
            axes.retain(|a| a.name != "size");
            axes.push(sizes);
        }
        Ok(Form {
            bench: bench.ok_or("no bench chosen (field `bench`)")?,
            fidelities,
            axes,
            verify_data,
            explain,
        })
    }
}

/// The `size` axis of `b`, `e` and `f` (factor 2 by default), if `b` and
/// `e` are given.
fn size_range([min, max, factor]: [Option<String>; 3]) -> Result<Option<Axis>, String> {
    let (min, max) = match (min, max) {
        (None, None) => return Ok(None),
        (Some(min), Some(max)) => (min, max),
        _ => return Err("sizes: give both -b (min bytes) and -e (max bytes)".to_owned()),
    };
    let bytes = |flag: &str, text: &str| {
        text.parse::<ByteSize>()
            .map_err(|e| format!("-{flag} {text}: {e}"))
    };
    let factor = match factor {
        Some(text) => text
            .parse()
            .map_err(|e| format!("-f {text}: {e} (expected an integer >= 2)"))?,
        None => 2,
    };
    let sizes = sweep::sizes(bytes("b", &min)?, bytes("e", &max)?, factor)?;
    Ok(Some(Axis {
        name: "size".to_owned(),
        values: sizes.iter().map(ToString::to_string).collect(),
    }))
}

/// The form: the workload, nccl-tests' size range, one text field per
/// workload parameter (comma-separated lists), the fidelities.
fn form() -> String {
    let mut html = String::from(
        "<h2>Run</h2>\n<form id=\"run\" action=\"/run\" method=\"get\">\n\
         <p><label>bench <select name=\"bench\">",
    );
    for workload in workloads::all() {
        let selected = if workload.name == "ccl_allreduce" {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            html,
            "<option value=\"{0}\" title=\"{1}\"{selected}>{0}</option>",
            workload.name,
            escape(workload.about())
        );
    }
    html += "</select></label></p>\n<p>sizes (nccl-tests): \
             <label>-b <input name=\"b\" size=\"6\" placeholder=\"1K\"></label>\
             <label>-e <input name=\"e\" size=\"6\" placeholder=\"1M\"></label>\
             <label>-f <input name=\"f\" size=\"3\" placeholder=\"2\"></label></p>\n<p>";
    for (name, (param, takers)) in workloads::all_params() {
        let _ = write!(
            html,
            "<label>{name} <input name=\"{name}\" size=\"14\" placeholder=\"{}[,...]\" title=\"{} [{}]\"></label>",
            escape(param.value_name),
            escape(param.help),
            takers.join(", ")
        );
    }
    html += "</p>\n<p>fidelity ";
    for fidelity in Fidelity::ALL {
        let _ = write!(
            html,
            "<label><input type=\"checkbox\" name=\"fidelity\" value=\"{0}\">{0}</label>",
            fidelity.name()
        );
    }
    let _ = writeln!(
        html,
        "<label><input type=\"checkbox\" name=\"verify_data\" value=\"1\">verify data</label>\
         <label><input type=\"checkbox\" name=\"explain\" value=\"1\">explain (critical path, heat map)</label></p>\n\
         <p><button type=\"submit\">run</button> (at most {MAX_POINTS} points; \
         leave the fields a workload does not take empty)</p>\n</form>"
    );
    html
}

/// The page head of `/run` for `plan`: what it runs and its limit.
fn run_head(plan: &Plan, limit: Duration) -> String {
    let name = plan.workload.name;
    let (head, _) = with_nav(name, "\u{0}")
        .split_once('\u{0}')
        .map(|(h, t)| (h.to_owned(), t.to_owned()))
        .expect("the marker is in the page");
    format!(
        "{head}<h1>{}</h1>\n<p class=\"progress\">running {} point(s), at most {} s ...</p>\n",
        escape(name),
        plan.points().len(),
        limit.as_secs()
    )
}

/// What closes a page [`run_head`] opened.
fn page_tail() -> String {
    let page = with_nav("", "\u{0}");
    page.split_once('\u{0}')
        .map(|(_, t)| t.to_owned())
        .expect("the marker is in the page")
}

/// The page of a refused request: its status's title and `message`.
fn error_page(status: u16, message: &str) -> String {
    let title = match status {
        503 => "busy",
        _ => "bad request",
    };
    let heading = match status {
        503 => "Busy, retry later",
        _ => "Bad request",
    };
    let body = format!(
        "<h1>{heading}</h1>\n<p class=\"error\">{}</p>\n",
        escape(message)
    );
    with_nav(title, &body)
}

/// Why a run is refused when the queue is full.
fn busy_message() -> String {
    format!(
        "{RUNS_AT_ONCE} runs are simulating and {RUNS_WAITING} more are waiting, the most \
         the server takes: retry later, or run it with `kernbench sweep`"
    )
}

const HTML: &str = "text/html; charset=utf-8";

/// A page titled `title` with the navigation above `body`.
fn with_nav(title: &str, body: &str) -> String {
    let nav = "<nav><a href=\"/\">home</a> | <a href=\"/#run\">run</a> | \
               <a href=\"/topology.svg\">topology</a> | <a href=\"/cube.svg\">cube</a></nav>\n";
    report::page(&format!("{title} - kernbench web"), &format!("{nav}{body}"))
}

/// Sizes of the topology drawing, in pixels.
mod px {
    pub const CUBE: u32 = 34;
    pub const CUBE_GAP: u32 = 14;
    pub const PAD: u32 = 16;
    pub const LABEL: u32 = 18;
    pub const SIP_GAP: u32 = 70;
    pub const MARGIN: u32 = 80;
    pub const STUB: f64 = 24.0;
    pub const HOST: u32 = 70;
}

/// Where things are drawn.
struct Geometry<'a> {
    machine: &'a Machine,
    sip_w: u32,
    sip_h: u32,
}

impl Geometry<'_> {
    fn new(machine: &Machine) -> Geometry<'_> {
        let (w, h) = machine.cube_grid();
        let span = |n: u32| n * px::CUBE + (n - 1) * px::CUBE_GAP + 2 * px::PAD;
        Geometry {
            machine,
            sip_w: span(w),
            sip_h: span(h) + px::LABEL,
        }
    }

    /// The SIP grid's width and height.
    fn grid(&self) -> (u32, u32) {
        let (w, h) = self.machine.sip_grid();
        let span = |n: u32, size: u32| n * size + (n - 1) * px::SIP_GAP;
        (span(w, self.sip_w), span(h, self.sip_h))
    }

    /// The canvas' width and height.
    fn canvas(&self) -> (u32, u32) {
        let (w, h) = self.grid();
        (2 * px::MARGIN + w, 2 * px::MARGIN + px::HOST + h)
    }

    /// SIP `sip`'s top-left corner.
    fn sip(&self, sip: u32) -> (f64, f64) {
        let pos = self.machine.sip_pos(sip);
        (
            f64::from(px::MARGIN + pos.col * (self.sip_w + px::SIP_GAP)),
            f64::from(px::MARGIN + px::HOST + pos.row * (self.sip_h + px::SIP_GAP)),
        )
    }

    /// Cube `cube` of `sip`'s top-left corner.
    fn cube(&self, sip: u32, cube: u32) -> (f64, f64) {
        let (x, y) = self.sip(sip);
        let pos = self.machine.cube_pos(cube);
        let step = f64::from(px::CUBE + px::CUBE_GAP);
        (
            x + f64::from(px::PAD) + f64::from(pos.col) * step,
            y + f64::from(px::PAD + px::LABEL) + f64::from(pos.row) * step,
        )
    }

    /// The middle of cube `cube`'s edge on `side`.
    fn cube_edge(&self, sip: u32, cube: u32, side: Side) -> (f64, f64) {
        let (x, y) = self.cube(sip, cube);
        let half = f64::from(px::CUBE) / 2.0;
        let (dx, dy) = direction(side);
        (x + half + dx * half, y + half + dy * half)
    }

    /// A SIP port: the port cube's edge pushed out to the SIP's edge.
    fn sip_port(&self, sip: u32, cube: u32, side: Side) -> (f64, f64) {
        let (x, y) = self.cube_edge(sip, cube, side);
        let (dx, dy) = direction(side);
        let reach = f64::from(px::PAD);
        (x + dx * reach, y + dy * reach)
    }
}

/// The unit step towards `side`.
fn direction(side: Side) -> (f64, f64) {
    match side {
        Side::N => (0.0, -1.0),
        Side::S => (0.0, 1.0),
        Side::E => (1.0, 0.0),
        Side::W => (-1.0, 0.0),
    }
}

/// The machine as SVG: the host, the SIPs in their grid with the inter-SIP
/// links (dashed where they wrap around), each SIP's cube mesh with its
/// UCIe links, the IO cube (PCIe endpoint, IO_CPU) shaded.
pub fn topology_svg(machine: &Machine) -> String {
    topology_heat_svg(machine, None)
}

/// [`topology_svg`] with every inter-SIP, UCIe and PCIe link coloured by its
/// time on the critical path in `heat` (the direction with more; the
/// tooltip gives both, with their busy fractions), the most critical
/// ranked, and a legend; `None`: the plain drawing.
pub fn topology_heat_svg(machine: &Machine, heat: Option<&Heat>) -> String {
    let geometry = Geometry::new(machine);
    let (width, height) = geometry.canvas();
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let (w, h) = machine.sip_grid();
    let (cw, ch) = machine.cube_grid();
    let _ = writeln!(
        svg,
        "<text x=\"{x}\" y=\"20\" font-size=\"14\">{} SIPs ({w}x{h}, {}), each {cw}x{ch} cubes of {} PEs</text>\n\
         <text x=\"{x}\" y=\"38\">shaded: the IO cube (PCIe endpoint, IO_CPU); blue: UCIe</text>\n\
         <text x=\"{x}\" y=\"54\">red: inter-SIP (dashed: wrap-around to the SIP named); grey: PCIe</text>",
        machine.sip_count(),
        machine.spec().system().sips.name(),
        machine.pes_per_cube(),
        x = px::MARGIN / 4,
    );
    if let Some(heat) = heat {
        // In the bottom margin, clear of the host box and the title.
        heat.legend(
            &mut svg,
            f64::from(px::MARGIN / 4),
            f64::from(height) - 44.0,
        );
    }
    draw_host(&mut svg, &geometry, heat);
    draw_links(&mut svg, &geometry, EdgeKind::InterSip, heat);
    for sip in 0..machine.sip_count() {
        draw_sip(&mut svg, &geometry, sip);
    }
    draw_links(&mut svg, &geometry, EdgeKind::Ucie, heat);
    svg += "</svg>\n";
    svg
}

/// The host box and its PCIe links to each SIP's IO cube, coloured by
/// `heat` when given.
fn draw_host(svg: &mut String, geometry: &Geometry<'_>, heat: Option<&Heat>) {
    let (width, _) = geometry.grid();
    let (x, y) = (
        f64::from(px::MARGIN + width / 2) - 40.0,
        f64::from(px::MARGIN),
    );
    let machine = geometry.machine;
    for (id, edge) in machine.edges().iter().enumerate() {
        if edge.kind != EdgeKind::Pcie || edge.reverse.index() < id {
            continue;
        }
        let (from, to) = (machine.node(edge.from), machine.node(edge.to));
        let Some(sip) = from.sip.or(to.sip) else {
            continue;
        };
        let (cx, cy) = geometry.cube_edge(sip, machine.io_cube(), Side::N);
        let (hx, hy) = (x + 40.0, y + 24.0);
        let Some(heat) = heat.map(|h| h.edge(machine, id)) else {
            let _ = writeln!(
                svg,
                "<line x1=\"{hx}\" y1=\"{hy}\" x2=\"{cx}\" y2=\"{cy}\" stroke=\"#bbb\"/>"
            );
            continue;
        };
        let color = heat.colour.unwrap_or_else(|| "#ccc".to_owned());
        let _ = write!(
            svg,
            "<g class=\"heat\"><title>{}</title><line x1=\"{hx}\" y1=\"{hy}\" x2=\"{cx}\" y2=\"{cy}\" \
             stroke=\"{color}\" stroke-width=\"2\"/>",
            heat.title
        );
        if let Some(rank) = heat.rank {
            heat::rank_label(svg, rank, ((hx + cx) / 2.0 + 3.0, (hy + cy) / 2.0));
        }
        svg.push_str("</g>\n");
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{x}\" y=\"{y}\" width=\"80\" height=\"24\" rx=\"4\" fill=\"#eee\" stroke=\"#555\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">host</text>",
        x + 40.0,
        y + 16.0
    );
}

/// One SIP: its box, name and cubes.
fn draw_sip(svg: &mut String, geometry: &Geometry<'_>, sip: u32) {
    let machine = geometry.machine;
    let (x, y) = geometry.sip(sip);
    let _ = writeln!(
        svg,
        "<g><title>sip{sip}</title><rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{}\" rx=\"6\" \
         fill=\"#f4f7fb\" stroke=\"#345\"/><text x=\"{}\" y=\"{}\" font-weight=\"bold\">sip{sip}</text></g>",
        geometry.sip_w,
        geometry.sip_h,
        x + f64::from(px::PAD),
        y + f64::from(px::LABEL) + 2.0
    );
    for cube in 0..machine.cubes_per_sip() {
        let (cx, cy) = geometry.cube(sip, cube);
        let fill = if cube == machine.io_cube() {
            "#ffe9b3"
        } else {
            "#fff"
        };
        let _ = writeln!(
            svg,
            "<g><title>sip{sip}.cube{cube}: {pes} PEs</title><rect x=\"{cx}\" y=\"{cy}\" \
             width=\"{size}\" height=\"{size}\" fill=\"{fill}\" stroke=\"#567\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">c{cube}</text></g>",
            cx + f64::from(px::CUBE) / 2.0,
            cy + f64::from(px::CUBE) / 2.0 + 4.0,
            size = px::CUBE,
            pes = machine.pes_per_cube(),
        );
    }
}

/// Every link of `kind` (UCIe or inter-SIP) once, between its ports.
fn draw_links(svg: &mut String, geometry: &Geometry<'_>, kind: EdgeKind, heat: Option<&Heat>) {
    let machine = geometry.machine;
    let plain = match kind {
        EdgeKind::Ucie => "#36c",
        _ => "#c33",
    };
    for (id, edge) in machine.edges().iter().enumerate() {
        if edge.kind != kind || edge.reverse.index() < id {
            continue;
        }
        let heat = heat.map(|h| h.edge(machine, id));
        let color = match &heat {
            None => plain.to_owned(),
            Some(heat) => heat.colour.clone().unwrap_or_else(|| "#ccc".to_owned()),
        };
        let color = color.as_str();
        if let Some(heat) = &heat {
            let _ = write!(svg, "<g class=\"heat\"><title>{}</title>", heat.title);
        }
        let (Some(a), Some(b)) = (port(geometry, edge.from), port(geometry, edge.to)) else {
            continue;
        };
        let mark = FaultMark::of(machine, id);
        if faces(&a, &b) {
            let ((x1, y1), (x2, y2)) = (a.at, b.at);
            if let Some(mark) = mark {
                mark.draw(svg, a.at, b.at);
            }
            let _ = writeln!(
                svg,
                "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"{color}\" stroke-width=\"3\"/>"
            );
        } else {
            draw_stub(svg, &a, b.sip, color, mark);
            draw_stub(svg, &b, a.sip, color, mark);
        }
        if let Some(heat) = heat {
            if let Some(rank) = heat.rank {
                let mid = ((a.at.0 + b.at.0) / 2.0, (a.at.1 + b.at.1) / 2.0);
                let at = if faces(&a, &b) { mid } else { a.at };
                heat::rank_label(svg, rank, (at.0 + 3.0, at.1 - 3.0));
            }
            svg.push_str("</g>\n");
        }
    }
}

/// A port as drawn.
struct Port {
    at: (f64, f64),
    side: Side,
    sip: u32,
}

/// Where a port is drawn.
fn port(geometry: &Geometry<'_>, node: crate::topology::NodeId) -> Option<Port> {
    let node = geometry.machine.node(node);
    let (sip, cube, side) = (node.sip?, node.cube?, node.side?);
    let at = match node.kind {
        NodeKind::SipPort => geometry.sip_port(sip, cube, side),
        _ => geometry.cube_edge(sip, cube, side),
    };
    Some(Port { at, side, sip })
}

/// Whether `b` lies the way `a` faces (else the link wraps around).
fn faces(a: &Port, b: &Port) -> bool {
    let (dx, dy) = direction(a.side);
    (b.at.0 - a.at.0) * dx + (b.at.1 - a.at.1) * dy > 0.0
}

/// One end of a wrap-around link: a dashed stub out of the port, labelled
/// with the SIP at its other end.
fn draw_stub(svg: &mut String, port: &Port, to: u32, color: &str, mark: Option<FaultMark>) {
    let (x, y) = port.at;
    let (dx, dy) = direction(port.side);
    let (x2, y2) = (x + dx * px::STUB, y + dy * px::STUB);
    if let Some(mark) = mark {
        mark.draw(svg, (x, y), (x2, y2));
    }
    let (lx, ly) = (x2 + dx * 4.0, y2 + dy * 10.0 + 4.0);
    let anchor = match port.side {
        Side::W => "end",
        Side::E => "start",
        Side::N | Side::S => "middle",
    };
    let _ = writeln!(
        svg,
        "<line x1=\"{x}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"{color}\" stroke-width=\"3\" \
         stroke-dasharray=\"5 3\"/><text x=\"{lx}\" y=\"{ly}\" text-anchor=\"{anchor}\" fill=\"{color}\">to sip{to}</text>"
    );
}

/// How a link of a degraded machine is marked under its colour: a grey
/// halo for a degraded one (`faults.links`, ADR-0106), a red dashed one
/// for one down for the run or a window (`faults.down`, ADR-0115); a
/// healthy machine has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultMark {
    Degraded,
    Down,
}

impl FaultMark {
    /// The mark of edge `id` (either direction), if it has one; down wins.
    fn of(machine: &Machine, id: usize) -> Option<FaultMark> {
        let edge = crate::topology::EdgeId::from_index(id);
        let outages = machine.outages();
        let down = [edge, machine.edge(edge).reverse]
            .iter()
            .any(|&e| outages.is_gone(e) || !outages.windows(e).is_empty());
        match (down, machine.is_degraded(edge)) {
            (true, _) => Some(FaultMark::Down),
            (false, true) => Some(FaultMark::Degraded),
            (false, false) => None,
        }
    }

    /// Draws the mark from `a` to `b`.
    fn draw(self, svg: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64)) {
        let (class, paint, title) = match self {
            FaultMark::Degraded => (
                "degraded",
                "stroke=\"#000\" stroke-opacity=\"0.35\"",
                "degraded (faults.links)",
            ),
            FaultMark::Down => (
                "down",
                "stroke=\"#c00\" stroke-opacity=\"0.6\" stroke-dasharray=\"4 3\"",
                "down (faults.down)",
            ),
        };
        let _ = writeln!(
            svg,
            "<line class=\"{class}\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" {paint} \
             stroke-width=\"9\"><title>{title}</title></line>"
        );
    }
}

/// One cube as SVG: its NoC routers in their grid, each labelled with
/// what it carries (`CubeLayout::slot`), the NoC links between them (the
/// machine's `noc` edges of SIP 0's IO cube) and where the UCIe and SIP
/// ports attach.
pub fn cube_svg(machine: &Machine) -> String {
    cube_heat_svg(machine, None)
}

/// [`cube_svg`] of the cube holding the NoC link with the most time on the
/// critical path ([`Heat::cube`]), its NoC links and its routers'
/// attachments (PE, HBM, IO and port links, a bar in the router's square)
/// coloured by that time, the most critical ranked, with a legend;
/// `None`: the plain drawing of SIP 0's IO cube.
pub fn cube_heat_svg(machine: &Machine, heat: Option<&Heat>) -> String {
    const GAP: f64 = 22.0;
    const MARGIN: f64 = 70.0;
    let layout = machine.layout();
    let (w, h) = (f64::from(layout.width()), f64::from(layout.height()));
    let width = 2.0 * MARGIN + w * CELL + (w - 1.0) * GAP;
    // A heat map's legend gets a band of its own below the drawing.
    let legend_band = if heat.is_some() { 50.0 } else { 0.0 };
    let height = 2.0 * MARGIN + 30.0 + h * CELL + (h - 1.0) * GAP + legend_band;
    let corner = |pos: GridPos| {
        let step = CELL + GAP;
        (
            MARGIN + f64::from(pos.col) * step,
            MARGIN + 30.0 + f64::from(pos.row) * step,
        )
    };
    let centre = |pos: GridPos| {
        let (x, y) = corner(pos);
        (x + CELL / 2.0, y + CELL / 2.0)
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">one cube: {}x{} NoC routers, {} PEs</text>\n\
         <text x=\"10\" y=\"38\">green: NoC links; blue: link ports; io_cpu, pcie_ep: IO cube only</text>\n",
        layout.width(),
        layout.height(),
        machine.pes_per_cube()
    );
    let (sip, cube) = heat.map_or((0, 0), |h| h.cube(machine));
    if let Some(heat) = heat {
        let _ = writeln!(
            svg,
            "<text x=\"10\" y=\"56\">sip{sip}.cube{cube}: its link has the most time on the critical path; \
             bars: PE, HBM, IO, port links</text>"
        );
        heat.legend(&mut svg, 10.0, height - 44.0);
    }
    let in_cube = |node: &crate::topology::Node| node.sip == Some(sip) && node.cube == Some(cube);
    for (id, edge) in machine.edges().iter().enumerate() {
        let (from, to) = (machine.node(edge.from), machine.node(edge.to));
        if edge.kind != EdgeKind::Noc || edge.reverse.index() < id || !in_cube(from) {
            continue;
        }
        let (Some(a), Some(b)) = (from.router, to.router) else {
            continue;
        };
        let ends = (centre(a), centre(b));
        if let Some(mark) = FaultMark::of(machine, id) {
            mark.draw(&mut svg, ends.0, ends.1);
        }
        cube_link(&mut svg, ends, heat.map(|h| h.edge(machine, id)));
    }
    cube_routers(&mut svg, layout, &corner);
    if let Some(heat) = heat {
        cube_attachments(&mut svg, machine, heat, (sip, cube), &corner);
    }
    cube_ports(&mut svg, layout, &centre);
    svg += "</svg>\n";
    svg
}

/// One link of [`cube_heat_svg`] from `a` to `b`, coloured by `heat`
/// (green without), its rank beside it.
fn cube_link(svg: &mut String, (a, b): ((f64, f64), (f64, f64)), heat: Option<EdgeHeat>) {
    let (color, title) = match &heat {
        None => ("#3a3".to_owned(), String::new()),
        Some(h) => (
            h.colour.clone().unwrap_or_else(|| "#ccc".to_owned()),
            format!("<title>{}</title>", h.title),
        ),
    };
    let ((x1, y1), (x2, y2)) = (a, b);
    let _ = write!(
        svg,
        "<g class=\"heat\">{title}<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"{color}\" stroke-width=\"4\"/>"
    );
    if let Some(rank) = heat.and_then(|h| h.rank) {
        heat::rank_label(svg, rank, ((x1 + x2) / 2.0 + 3.0, (y1 + y2) / 2.0 - 4.0));
    }
    svg.push_str("</g>\n");
}

/// The links between the routers of cube `(sip, cube)` and what hangs on
/// them (PE, HBM, IO_CPU, PCIe endpoint, UCIe and inter-SIP ports), each
/// a bar across the top of its router's square (stacked when a router has
/// several), coloured by `heat`.
fn cube_attachments(
    svg: &mut String,
    machine: &Machine,
    heat: &Heat,
    (sip, cube): (u32, u32),
    corner: &dyn Fn(GridPos) -> (f64, f64),
) {
    let mut bars: std::collections::BTreeMap<GridPos, u32> = std::collections::BTreeMap::new();
    for (id, edge) in machine.edges().iter().enumerate() {
        if !matches!(edge.kind, EdgeKind::Attach | EdgeKind::HbmPort) || edge.reverse.index() < id {
            continue;
        }
        let (from, to) = (machine.node(edge.from), machine.node(edge.to));
        let router = match (from.kind, to.kind) {
            (NodeKind::Router, NodeKind::Router) => continue,
            (NodeKind::Router, _) => from,
            (_, NodeKind::Router) => to,
            _ => continue,
        };
        let here = router.sip == Some(sip) && router.cube == Some(cube);
        let Some(pos) = router.router.filter(|_| here) else {
            continue;
        };
        let stacked = bars.entry(pos).or_default();
        let (x, y) = corner(pos);
        let y = y + 8.0 + f64::from(*stacked) * 7.0;
        *stacked += 1;
        let bar = ((x + 8.0, y), (x + CELL - 8.0, y));
        cube_link(svg, bar, Some(heat.edge(machine, id)));
    }
}

/// A router's square in [`cube_heat_svg`], in pixels.
const CELL: f64 = 64.0;

/// [`cube_heat_svg`]'s routers, each a square at `corner(pos)` naming its
/// slot.
fn cube_routers(svg: &mut String, layout: &CubeLayout, corner: &dyn Fn(GridPos) -> (f64, f64)) {
    for row in 0..layout.height() {
        for col in 0..layout.width() {
            let pos = GridPos { row, col };
            let slot = layout.slot(pos);
            let fill = match slot {
                Slot::Pe(_) => "#e3efff",
                Slot::HbmPort => "#f3e3ff",
                Slot::Free => "#fafafa",
                _ => "#ffe9b3",
            };
            let (x, y) = corner(pos);
            let label = slot.to_string();
            let _ = writeln!(
                svg,
                "<g><title>router r{row}c{col}: {slot}</title><rect x=\"{x}\" y=\"{y}\" width=\"{CELL}\" \
                 height=\"{CELL}\" rx=\"4\" fill=\"{fill}\" stroke=\"#567\"/><text x=\"{}\" y=\"{}\" \
                 text-anchor=\"middle\" font-size=\"{:.1}\">{label}</text><text x=\"{}\" y=\"{}\" \
                 text-anchor=\"middle\" fill=\"#888\" font-size=\"9\">r{row}c{col}</text></g>",
                x + CELL / 2.0,
                y + CELL / 2.0,
                label_font_size(&label),
                x + CELL / 2.0,
                y + CELL - 6.0
            );
        }
    }
}

/// The font size (11 at most) at which `label` fits a router's square
/// with 4 px to spare each side, taking a glyph as 0.7 em wide (DejaVu
/// Sans, the usual sans-serif, averages about that on these labels).
fn label_font_size(label: &str) -> f64 {
    let em_per_char = 0.7;
    let fits = (CELL - 8.0) / (label.chars().count().max(1) as f64 * em_per_char);
    fits.min(11.0)
}

/// [`cube_heat_svg`]'s link ports, an arrow out of each side's router
/// (centred at `centre(pos)`).
fn cube_ports(svg: &mut String, layout: &CubeLayout, centre: &dyn Fn(GridPos) -> (f64, f64)) {
    for side in Side::ALL {
        let (x, y) = centre(layout.port(side));
        let (dx, dy) = direction(side);
        let (x1, y1) = (x + dx * CELL / 2.0, y + dy * CELL / 2.0);
        let (x2, y2) = (x1 + dx * 20.0, y1 + dy * 20.0);
        let anchor = match side {
            Side::W => "end",
            Side::E => "start",
            Side::N | Side::S => "middle",
        };
        let _ = writeln!(
            svg,
            "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"#36c\" stroke-width=\"4\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"#36c\">{} port</text>",
            x2 + dx * 4.0,
            y2 + dy * 12.0 + 4.0,
            side.letter().to_uppercase()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(overrides: &[&str]) -> Machine {
        let overrides = crate::config::Overrides::parse(
            &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        let spec =
            TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
        Machine::build(&spec).unwrap()
    }

    /// Short labels keep the drawing's 11 px; a long one shrinks until it
    /// fits its square with room to spare.
    #[test]
    fn a_router_label_fits_its_square() {
        for (label, size) in [("pe0", 11.0), ("pcie_ep", 11.0), ("mcpu.dma", 10.0)] {
            let got = label_font_size(label);
            assert_eq!(got, size, "{label}");
            assert!(label.len() as f64 * 0.7 * got <= CELL - 8.0, "{label}");
        }
    }

    #[test]
    fn the_form_query_becomes_axes_with_nccl_tests_sizes() {
        let form = Form::parse(
            "bench=ccl_allreduce&b=1K&e=16K&f=4&algorithm=ring_allreduce%2Ctree&fidelity=flow&fidelity=packet&dtype=&size=8",
        )
        .unwrap();
        assert_eq!(form.bench, "ccl_allreduce");
        assert_eq!(form.fidelities, ["flow", "packet"]);
        assert!(!form.verify_data);
        let axes: Vec<_> = form
            .axes
            .iter()
            .map(|a| format!("{}={}", a.name, a.values.join(",")))
            .collect();
        // 1K × 4^i up to 16K, in bytes.
        assert_eq!(
            axes,
            ["algorithm=ring_allreduce,tree", "size=1024,4096,16384"]
        );
    }

    #[test]
    fn bad_queries_are_errors_naming_the_field() {
        let error = |query| Form::parse(query).unwrap_err();
        assert!(error("bench=x&nonsense=1").contains("`nonsense`"));
        assert!(error("b=1K&e=2K").contains("no bench"));
        assert!(error("bench=x&b=1K").contains("-b"));
        assert!(error("bench=x&b=1Q&e=2K").contains("-b 1Q"));
        assert!(error("bench=x&b=1K&e=2K&f=1").contains("step factor"));
    }

    #[test]
    fn the_drawing_has_every_sip_cube_and_link_once() {
        let machine = machine(&["system.sips.count=4"]);
        let svg = topology_svg(&machine);
        let count = |needle: &str| svg.matches(needle).count();
        assert_eq!(count("<title>sip"), 4 + 4 * 16);
        // A 4x4 mesh has 24 UCIe links; a ring of 4 SIPs has 4 links, one
        // of them wrapping around.
        assert_eq!(count("stroke=\"#36c\""), 4 * 24);
        assert_eq!(count("stroke=\"#c33\""), 3 + 2);
        assert_eq!(count("stroke-dasharray"), 2);
        assert_eq!(count(">to sip0<") + count(">to sip3<"), 2);
        assert_eq!(count("stroke=\"#bbb\""), 4);
    }

    #[test]
    fn the_cube_drawing_has_every_router_and_a_mesh_of_noc_links() {
        let machine = machine(&[]);
        let layout = machine.layout();
        let (w, h) = (layout.width() as usize, layout.height() as usize);
        let svg = cube_svg(&machine);
        let count = |needle: &str| svg.matches(needle).count();
        assert_eq!(count("<title>router"), w * h);
        assert_eq!(count("stroke=\"#3a3\""), (w - 1) * h + w * (h - 1));
        for pe in 0..machine.pes_per_cube() {
            assert_eq!(count(&format!(">pe{pe}<")), 1, "pe{pe}");
        }
        assert_eq!(count(" port</text>"), 4);
    }
}
