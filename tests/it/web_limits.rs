//! `kernbench web` under a long run (issue 26 item 13): requests are
//! answered while a run is in flight, and a run stops at its wall-time
//! limit with a page saying so.

use crate::cli_common;

use std::io::{BufRead, BufReader, Read};

use cli_common::web::WebServer;

fn start(limit_secs: &str) -> WebServer {
    WebServer::start(&[], &["--run-limit", limit_secs])
}

#[test]
fn a_long_run_neither_blocks_other_requests_nor_outlives_its_limit() {
    let server = start("3");
    // 21 sizes up to 1 GiB: minutes of simulation in a debug build.
    let mut run = BufReader::new(server.request("run?bench=ccl_allreduce&b=1K&e=1G"));
    let mut page = String::new();
    while !page.contains("running 21 point(s)") {
        assert!(run.read_line(&mut page).unwrap() > 0, "{page}");
    }
    let mut svg = String::new();
    server
        .request("topology.svg")
        .read_to_string(&mut svg)
        .unwrap();
    assert!(svg.starts_with("HTTP/1.") && svg.contains("<svg"), "{svg}");
    // Causal, not timed: had the drawing waited for the run, the run's
    // whole page would be waiting in the socket by now.
    run.get_ref().set_nonblocking(true).unwrap();
    let mut so_far = Vec::new();
    let _ = run.read_to_end(&mut so_far);
    let so_far = String::from_utf8_lossy(&so_far);
    assert!(
        !so_far.contains("</html>"),
        "the drawing waited for the run"
    );
    run.get_ref().set_nonblocking(false).unwrap();
    page += &so_far;
    run.read_to_string(&mut page).unwrap();
    assert!(page.contains("stopped at the limit of 3 s"), "{page}");
    assert!(page.contains("not run: the sweep was stopped at its limit"));
    assert!(page.trim_end().ends_with("</html>"), "the page is whole");
}

#[test]
fn a_data_check_too_big_for_the_form_is_refused_up_front() {
    let server = start("60");
    let mut reply = String::new();
    server
        .request("run?bench=ccl_allreduce&size=1G&verify_data=1")
        .read_to_string(&mut reply)
        .unwrap();
    assert!(
        reply.starts_with("HTTP/1.0 400") || reply.starts_with("HTTP/1.1 400"),
        "{reply}"
    );
    assert!(
        reply.contains("the data check of these points would keep about"),
        "{reply}"
    );
}
