//! `grpc_server`'s command line and main loop, shared by the `grpc_server` binary and the
//! report, which runs the same server as a child of itself (`tierpool-bench grpc-server ...`)
//! rather than building the binary while it runs.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{serve, Mode, Served, Unary};
use crate::alloc;
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};

/// grpc.testing.BenchmarkService on tonic, stock or through tierpool.
#[derive(Debug, Parser)]
#[command(name = "grpc_server")]
struct Args {
    /// Address to listen on (port 0: any free port, printed)
    #[arg(long, default_value = "127.0.0.1:50051")]
    addr: SocketAddr,
    /// stock: plain tonic (tonic_prost::ProstCodec); pooled: every method through tierpool-tonic
    #[arg(long, value_parser = ["stock", "pooled"], default_value = "pooled")]
    mode: String,
    /// How the pooled mode serves UnaryCall: codec (the generated service with PooledCodec:
    /// tonic's buffer, then a pooled one) or reader (PooledMethods::unary: one copy; --mode
    /// pooled only)
    #[arg(long, value_parser = ["codec", "reader"], default_value = "codec")]
    unary: String,
    /// A budget on the bytes the pooled mode has in use, in MiB (--mode pooled only): every
    /// stream's messages under it, HTTP/2's windows set so that waiting streams cannot hold
    /// the connection's (256 KiB a stream, 64 MiB the connection, 200 streams)
    #[arg(long)]
    budget_mib: Option<usize>,
}

fn stats(served: &Served) {
    let a = alloc::counted();
    let pool = tierpool::default_pool().stats();
    println!(
        "stats requests={} allocs={} bytes={} pool_hits={} pool_misses={} pool_released_at_cap={}",
        served.requests.load(Ordering::Relaxed),
        a.allocs,
        a.bytes,
        pool.hits,
        pool.misses,
        pool.released_at_cap
    );
}

/// `grpc_server`'s main: `args` as its command line (the first is the program's name).
pub fn server_main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let mode = if args.mode == "stock" {
        Mode::Stock
    } else {
        Mode::Pooled
    };
    let unary = if args.unary == "reader" {
        Unary::Reader
    } else {
        Unary::Codec
    };
    if mode == Mode::Stock && unary == Unary::Reader {
        eprintln!(
            "grpc_server: --unary reader needs --mode pooled (the stock mode is plain tonic)"
        );
        return ExitCode::from(2);
    }
    if let Some(mib) = args.budget_mib {
        if mode == Mode::Stock {
            eprintln!("grpc_server: --budget-mib needs --mode pooled (the stock mode has no pool)");
            return ExitCode::from(2);
        }
        let pool = tierpool::BufferPool::builder()
            .max_in_use_bytes(mib.saturating_mul(1 << 20))
            .background_trim(true)
            .build();
        match pool.map(tierpool::set_default_pool) {
            Ok(Ok(())) => {}
            Ok(Err(_)) => unreachable!("the default pool is set once, here, before any use"),
            Err(e) => {
                eprintln!("grpc_server: --budget-mib {mib}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let windows = args.budget_mib.is_some();
    let _ = crate::nofile::raise_nofile(0);
    alloc::set_counting(true);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let served = Arc::new(Served::default());
    let result = rt.block_on(async {
        let listener = match tokio::net::TcpListener::bind(args.addr).await {
            Ok(l) => l,
            Err(e) => return Err(format!("cannot listen on {}: {e}", args.addr)),
        };
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        println!("listening on {addr} ({})", mode.name());
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        let mut usr1 = signal(SignalKind::user_defined1()).map_err(|e| e.to_string())?;
        let counts = served.clone();
        let shutdown = async move {
            loop {
                tokio::select! {
                    _ = term.recv() => break,
                    _ = int.recv() => break,
                    _ = usr1.recv() => stats(&counts),
                }
            }
        };
        serve(listener, mode, unary, windows, served.clone(), shutdown)
            .await
            .map_err(|e| e.to_string())
    });
    stats(&served);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grpc_server: {e}");
            ExitCode::FAILURE
        }
    }
}
