#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;
use ctxgc_core::frontend::events::{EventOptions, lower_events};
use ctxgc_core::{Session, render::prompt};
fn main() {
    sizes();
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let text = ctxgc_core::synth::events_jsonl(n, 42);
    let t = Instant::now();
    let items = lower_events(&text, &EventOptions::default()).unwrap();
    eprintln!("lower {:?}", t.elapsed());
    let t = Instant::now();
    let mut s = Session::new(Default::default());
    s.extend(items).unwrap();
    eprintln!("extend {:?}", t.elapsed());
    let t = Instant::now();
    s.compile();
    eprintln!("compile {:?}", t.elapsed());
    let t = Instant::now();
    let d = s.decisions();
    eprintln!("decisions {:?} {}", t.elapsed(), d.len());
    let t = Instant::now();
    let r = prompt::render(&s);
    eprintln!("render {:?} {}", t.elapsed(), r.text.len());
    let t = Instant::now();
    drop(s);
    eprintln!("drop {:?}", t.elapsed());
}
#[allow(dead_code)]
fn sizes() {
    eprintln!("Item {} Kind {}", std::mem::size_of::<ctxgc_core::Item>(), std::mem::size_of::<ctxgc_core::Kind>());
}
