//! MoE expert offloading with StrideWeave: the Rust twin of
//! `examples/c/moe_offload.c`.
//!
//! A synthetic mixture-of-experts feed-forward layer keeps its expert
//! weights (experts x dim x dim) in one TiledEvictable, one expert per
//! tile. The secondary tier (a file, zstd-compressed memory or host memory)
//! holds every expert; the primary tier (CPU memory, or with
//! `--compute vulkan` a Vulkan device's) holds at most a budget of them. A
//! router picks top-k experts per token batch from a skewed, repeatable
//! distribution. The built-in LRU policy decides what stays resident and
//! prefetches the next batch's experts, and the projection of batch b+1's
//! experts runs while batch b computes.
//!
//! The same router sequence then runs with every expert resident and with
//! naive synchronous loading (project, wait, compute, evict), and the final
//! table compares them. With `--train` the layer is trained instead. The
//! generator, the router, the weights and the tokens are the C demo's, so
//! both print the same hits and the same checksum.
//!
//! ```text
//! cargo run --release --example moe_offload -- [--experts 64] [--dim 1024]
//!     [--topk 4] [--tokens 32] [--batches 48] [--tier file|zstd|host]
//!     [--budget 0.25] [--dtype f32|bf16] [--policy lru|none] [--train]
//!     [--compute cpu|vulkan] [--csv FILE] [--dir DIR] [--quiet]
//! ```
use std::fs::File;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use strideweave::{
    no_grad, BF16Bits, Carrier, DType, Device, FileOptions, LruPolicy, Policy, Reduction, Result, Runtime, Tensor,
    TileLocation, TileSelection, TileSet, TiledEvictable, ZstdOptions,
};

struct Options {
    experts: usize,
    dim: usize,
    topk: usize,
    tokens: usize,
    batches: usize,
    tier: String,
    budget: f64,
    dtype: DType,
    use_policy: bool,
    train: bool,
    quiet: bool,
    csv: Option<String>,
    dir: Option<String>,
    device: Option<Device>,
}

#[derive(Default)]
struct RunStats {
    name: &'static str,
    seconds: f64,
    wait_seconds: f64,
    checksum: f64,
    hits: u64,
    misses: u64,
    promoted: u64,
    evicted: u64,
}

/// The C demo's xorshift64* generator, so every run is repeatable and both
/// demos draw the same numbers.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        let mut s = self.0;
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        self.0 = s;
        (s.wrapping_mul(2685821657736338717) >> 11) as f64 / 9007199254740992.0
    }
}

/// Router: top-k distinct experts per batch, Zipf-skewed over a fixed shuffle.
fn route_all(o: &Options) -> Vec<Vec<i64>> {
    let mut rng = Rng(0x5eed1234abcd);
    let mut order: Vec<usize> = (0..o.experts).collect();
    for e in (1..o.experts).rev() {
        let j = (rng.uniform() * (e + 1) as f64) as usize;
        order.swap(e, j);
    }
    let weight: Vec<f64> = (0..o.experts).map(|r| 1.0 / (r as f64 + 1.0).powf(1.1)).collect();
    let total: f64 = weight.iter().sum();
    (0..o.batches)
        .map(|_| {
            let mut picks: Vec<i64> = Vec::with_capacity(o.topk);
            while picks.len() < o.topk {
                let u = rng.uniform() * total;
                let (mut acc, mut r) = (0.0, 0);
                while r < o.experts - 1 {
                    acc += weight[r];
                    if acc >= u {
                        break;
                    }
                    r += 1;
                }
                let e = order[r] as i64;
                if !picks.contains(&e) {
                    picks.push(e);
                }
            }
            picks
        })
        .collect()
}

fn selection_for(experts: &[i64]) -> Result<TileSelection> {
    TileSelection::new([experts, &[0], &[0]])
}

fn tile_set_for(experts: &[i64]) -> Result<TileSet> {
    TileSet::new(experts.iter().map(|&e| [e, 0, 0]))
}

/// The secondary tier holding every expert, tile-major: expert e occupies
/// slots [e*dim*dim, (e+1)*dim*dim), values first mode fastest.
fn make_secondary(rt: &Runtime, o: &Options, seed: u64) -> Result<Carrier> {
    let tile = o.dim * o.dim;
    let total = tile * o.experts;
    let c = match o.tier.as_str() {
        "file" => Carrier::file(
            rt,
            o.dtype,
            total,
            &FileOptions { directory: o.dir.as_ref().map(Into::into), ..Default::default() },
        )?,
        "zstd" => Carrier::zstd(rt, o.dtype, total, &ZstdOptions { frame_elements: tile, ..Default::default() })?,
        _ => Carrier::host(rt, o.dtype, total)?,
    };
    let mut rng = Rng(seed);
    let scale = 1.0 / (o.dim as f64).sqrt();
    let mut values = vec![0f32; tile];
    for e in 0..o.experts {
        for v in values.iter_mut() {
            *v = ((rng.uniform() * 2.0 - 1.0) * scale) as f32;
        }
        if o.dtype == DType::F32 {
            c.write(e * tile, &values)?;
        } else {
            let bits: Vec<BF16Bits> = values.iter().map(|&v| BF16Bits::from_f32(v)).collect();
            c.write(e * tile, &bits)?;
        }
    }
    Ok(c)
}

/// The empty primary tier: CPU memory, or the Vulkan device's.
fn make_primary(rt: &Runtime, o: &Options) -> Result<Carrier> {
    match &o.device {
        Some(d) => Carrier::vulkan(rt, d, o.dtype, 0),
        None => Carrier::cpu(rt, o.dtype, 0),
    }
}

/// `t` moved to the primary tier's compute carrier, where the projected
/// experts are: ops take operands of one carrier kind.
fn on_compute(rt: &Runtime, o: &Options, t: Tensor) -> Result<Tensor> {
    match &o.device {
        None => Ok(t),
        Some(d) => t.move_to(&Carrier::vulkan(rt, d, t.dtype()?, 0)?)?.wait(),
    }
}

/// factor * g. The CPU carrier's elementwise ops take f32 and f64, so a
/// bf16 gradient is scaled on the host in f32 and rounded back once.
fn scaled(rt: &Runtime, o: &Options, g: &Tensor, factor: f64) -> Result<Tensor> {
    if g.dtype()? != DType::BF16 {
        return g.mul_scalar(factor);
    }
    let h: Vec<BF16Bits> = g.to_vec()?;
    let h: Vec<BF16Bits> = h.iter().map(|b| BF16Bits::from_f32((b.to_f32() as f64 * factor) as f32)).collect();
    on_compute(rt, o, Tensor::from_slice(rt, &g.shape()?, &h)?)
}

fn as_tensor(rt: &Runtime, o: &Options, shape: &[i64], v: &[f32]) -> Result<Tensor> {
    let t = if o.dtype == DType::F32 {
        Tensor::from_slice(rt, shape, v)?
    } else {
        let h: Vec<BF16Bits> = v.iter().map(|&x| BF16Bits::from_f32(x)).collect();
        Tensor::from_slice(rt, shape, &h)?
    };
    on_compute(rt, o, t)
}

/// x: (1, dim, tokens), broadcast over the selected experts.
fn make_tokens(rt: &Runtime, o: &Options, batch: u64) -> Result<Tensor> {
    let mut rng = Rng(0x70c3e5 + batch * 7919);
    let v: Vec<f32> = (0..o.dim * o.tokens).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect();
    as_tensor(rt, o, &[1, o.dim as i64, o.tokens as i64], &v)
}

fn make_target(rt: &Runtime, o: &Options, batch: u64) -> Result<Tensor> {
    let mut rng = Rng(0x7a26e7 + batch * 104729);
    let v: Vec<f32> = (0..o.dim * o.tokens).map(|_| (rng.uniform() - 0.5) as f32).collect();
    on_compute(rt, o, Tensor::from_slice(rt, &[o.dim as i64, o.tokens as i64], &v)?)
}

/// y = sum over the selected experts of W_e @ x -> (dim, tokens), f32: bf16
/// weights and tokens give their f32 sums.
fn expert_layer(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let wide = if w.dtype()? == DType::F64 { None } else { Some(DType::F32) };
    w.matmul_ex(x, wide)?.reduce_sum(&[0], false)
}

/// How many of a batch's experts are primary-resident as its projection is
/// issued: the hits of a run without the LRU policy.
fn resident_count(weights: &TiledEvictable, experts: &[i64]) -> Result<u64> {
    let mut n = 0;
    for &e in experts {
        n += (weights.tile_state(&[e, 0, 0])?.location == TileLocation::Primary) as u64;
    }
    Ok(n)
}

/// Makes the LRU policy's counters the run's; returns the hits since the last call.
fn take_lru_counters(lru: &LruPolicy, st: &mut RunStats) -> Result<u64> {
    let s = lru.stats()?;
    let hits = s.hits - st.hits;
    st.hits = s.hits;
    st.misses = s.misses;
    st.promoted = s.promoted;
    st.evicted = s.evicted;
    Ok(hits)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Offload,
    Resident,
    Naive,
}

fn budget_tiles(o: &Options) -> usize {
    (o.budget * o.experts as f64).ceil() as usize
}

fn run(rt: &Runtime, o: &Options, picks: &[Vec<i64>], mode: Mode, csv: &mut Option<File>) -> Result<RunStats> {
    let mut st = RunStats {
        name: match mode {
            Mode::Offload => "offloaded",
            Mode::Resident => "resident",
            Mode::Naive => "naive",
        },
        ..Default::default()
    };
    let secondary = make_secondary(rt, o, 0xa11ce5)?;
    let primary = make_primary(rt, o)?;
    let lru = if mode == Mode::Offload && o.use_policy { Some(LruPolicy::new(budget_tiles(o))?) } else { None };
    let policy = lru.as_ref().map_or(Policy::None, Policy::from);
    let grid = [o.experts as i64, 1, 1];
    let tile = [1, o.dim as i64, o.dim as i64];
    let weights = TiledEvictable::new(&primary, &secondary, &grid, &tile, policy)?;
    let full = weights.full_tensor()?;
    if mode == Mode::Resident {
        weights.promote(&weights.valid_tiles()?)?;
    }
    let t0 = Instant::now();
    let mut next = None;
    for (b, experts) in picks.iter().enumerate() {
        let tb = Instant::now();
        let (sel, pending, mut hits) = match next.take() {
            Some(n) => n,
            None => {
                let sel = selection_for(experts)?;
                let hits = if lru.is_some() { 0 } else { resident_count(&weights, experts)? };
                let pending = weights.project(&full, &sel, None)?;
                (sel, pending, hits)
            }
        };
        let tw = Instant::now();
        let w = pending.wait()?;
        let waited = tw.elapsed().as_secs_f64();
        // This batch's request is the last one committed: the next is issued below.
        if let Some(lru) = &lru {
            hits = take_lru_counters(lru, &mut st)?;
        }
        if mode == Mode::Offload && b + 1 < picks.len() {
            // Start the next batch's gather now, and hint the one after it.
            if let Some(lru) = &lru {
                if b + 2 < picks.len() {
                    lru.hint(&tile_set_for(&picks[b + 2])?)?;
                }
            }
            let following = &picks[b + 1];
            let next_sel = selection_for(following)?;
            let next_hits = if lru.is_some() { 0 } else { resident_count(&weights, following)? };
            let next_pending = weights.project(&full, &next_sel, None)?;
            next = Some((next_sel, next_pending, next_hits));
        }
        let x = make_tokens(rt, o, b as u64)?;
        let y = expert_layer(&w, &x)?;
        st.checksum += y.sum()?.item()?;
        drop((y, x, w));
        if mode == Mode::Naive {
            weights.evict(&sel)?;
        }
        let latency = tb.elapsed().as_secs_f64();
        st.wait_seconds += waited;
        let topk = o.topk as u64;
        if lru.is_none() {
            // Without a policy a projection promotes what it misses and nothing
            // is evicted but what the naive run evicts after each batch.
            st.hits += hits;
            st.misses += topk - hits;
            st.promoted += topk - hits;
            if mode == Mode::Naive {
                st.evicted += topk;
            }
        }
        if !o.quiet {
            println!(
                "[{:<9}] batch {:3}/{}  experts {:2},{:2},...  latency {:7.2} ms  waited {:6.2} ms  hits {}/{}",
                st.name,
                b + 1,
                o.batches,
                experts[0],
                experts[if o.topk > 1 { 1 } else { 0 }],
                latency * 1e3,
                waited * 1e3,
                hits,
                o.topk
            );
        }
        if let Some(f) = csv.as_mut() {
            writeln!(
                f,
                "{},{},{:.4},{:.4},{:.4}",
                st.name,
                b,
                latency * 1e3,
                waited * 1e3,
                hits as f64 / o.topk as f64
            )
            .map_err(|e| strideweave::Error::new(strideweave::ErrorCode::Io, e.to_string()))?;
        }
    }
    st.seconds = t0.elapsed().as_secs_f64();
    if let Some(lru) = &lru {
        take_lru_counters(lru, &mut st)?; // promotions the last hint started
    }
    drop(full);
    weights.dispose()?;
    Ok(st)
}

/// Every weight's bytes read through the full tensor: an FNV-1a digest, and
/// the sum of the values.
fn weights_digest(full: &Tensor, o: &Options) -> Result<(u64, f64)> {
    let values: Vec<f32> = if o.dtype == DType::F32 {
        full.to_vec::<f32>()?
    } else {
        full.to_vec::<BF16Bits>()?.iter().map(|b| b.to_f32()).collect()
    };
    let mut h: u64 = 0xcbf29ce484222325;
    let mut eat = |byte: u8| h = (h ^ byte as u64).wrapping_mul(0x100000001b3);
    if o.dtype == DType::F32 {
        values.iter().flat_map(|v| v.to_le_bytes()).for_each(&mut eat);
    } else {
        values.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).for_each(&mut eat);
    }
    let sum = values.iter().map(|&v| v as f64).sum();
    Ok((h, sum))
}

/// loss = 0.5 * || sum_e W_e x - target ||^2 with a fixed target per input
/// batch; SGD on the touched experts only. Ok(true) when the loss fell and
/// every update survived eviction.
fn train(rt: &Runtime, o: &Options, picks: &[Vec<i64>]) -> Result<bool> {
    let secondary = make_secondary(rt, o, 0xa11ce5)?;
    let primary = make_primary(rt, o)?;
    // An optimiser step updates a batch's experts together, so the budget holds at least those (the LRU
    // refuses an update larger than its budget).
    let lru = LruPolicy::new(budget_tiles(o).max(o.topk))?;
    let weights =
        TiledEvictable::new(&primary, &secondary, &[o.experts as i64, 1, 1], &[1, o.dim as i64, o.dim as i64], &lru)?;
    let full = weights.full_tensor()?;
    full.set_requires_grad(true)?;
    let lr = 1.0 / (o.dim as f64 * o.topk as f64);
    let window = (o.batches / 4).max(1);
    let mut losses = Vec::with_capacity(o.batches);
    for (b, experts) in picks.iter().enumerate() {
        let sel = selection_for(experts)?;
        let w = weights.project(&full, &sel, None)?.wait()?;
        let x = make_tokens(rt, o, (b % 8) as u64)?;
        let y = expert_layer(&w, &x)?;
        let target = make_target(rt, o, (b % 8) as u64)?;
        let diff = y.add(&target.mul_scalar(-1.0)?)?;
        let loss_t = diff.elementwise_mul(&diff)?.mul_scalar(0.5)?.sum()?;
        let loss = loss_t.item()?;
        loss_t.backward(None, false)?;
        // SGD on the touched experts only: the gradient is a tiled tensor
        // whose untouched tiles are implicit zeros.
        let grad = full.grad()?.expect("a gradient after backward");
        no_grad(|| -> Result<()> {
            let grad_tiles = TiledEvictable::of(&grad)?;
            let g = grad_tiles.project(&grad, &sel, None)?.wait()?;
            let step = scaled(rt, o, &g, -lr)?;
            weights.update_async(&full, &step, &sel, Reduction::Add)?.wait()
        })?;
        full.clear_grad()?;
        losses.push(loss);
        if !o.quiet {
            println!("[train    ] batch {:3}/{}  loss {:.6}", b + 1, o.batches, loss);
        }
    }
    // Dirty experts must survive eviction: read every expert, evict all, and
    // read them again from the secondary tier.
    let _no_grad = strideweave::NoGradGuard::new();
    let dirty = weights.dirty_tiles()?.len();
    let (hash_before, sum_before) = weights_digest(&full, o)?;
    weights.evict(&weights.primary_tiles()?)?;
    let still = weights.dirty_tiles()?.len();
    let (hash_after, sum_after) = weights_digest(&full, o)?;
    let early: f64 = losses[..window].iter().sum::<f64>() / window as f64;
    let late: f64 = losses[losses.len() - window..].iter().sum::<f64>() / window as f64;
    println!(
        "\ntraining: loss {:.6} -> {:.6} (mean of first {} batches {:.6}, last {} {:.6})",
        losses[0],
        losses[losses.len() - 1],
        window,
        early,
        window,
        late
    );
    println!(
        "write-back: {} dirty experts evicted, {} still dirty, weight sum {:.6} before and {:.6} after reload, {}",
        dirty,
        still,
        sum_before,
        sum_after,
        if hash_before == hash_after { "every byte identical" } else { "BYTES DIFFER" }
    );
    let ok = late < early && still == 0 && hash_before == hash_after;
    println!(
        "{}",
        if ok { "training verified: loss fell and every update survived eviction" } else { "TRAINING CHECK FAILED" }
    );
    drop(full);
    weights.dispose()?;
    Ok(ok)
}

/// C's `%.{precision}g`.
fn format_g(x: f64, precision: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { if x.is_sign_negative() { "-0" } else { "0" }.to_owned() } else { format!("{x}") };
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if exp < -4 || exp >= p as i32 {
        format!("{}e{}{:02}", strip(mantissa), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        strip(&format!("{:.*}", (p as i32 - 1 - exp) as usize, x))
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: moe_offload [--experts N] [--dim D] [--topk K] [--tokens T] [--batches B]\n\
         \x20                  [--tier file|zstd|host] [--budget F] [--dtype f32|bf16]\n\
         \x20                  [--policy lru|none] [--train] [--compute cpu|vulkan] [--csv FILE] [--dir DIR]\n\
         \x20                  [--quiet]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut o = Options {
        experts: 64,
        dim: 1024,
        topk: 4,
        tokens: 32,
        batches: 48,
        tier: "file".into(),
        budget: 0.25,
        dtype: DType::F32,
        use_policy: true,
        train: false,
        quiet: false,
        csv: None,
        dir: None,
        device: None,
    };
    let mut compute = "cpu".to_owned();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        match a {
            "--train" => {
                o.train = true;
                continue;
            }
            "--quiet" => {
                o.quiet = true;
                continue;
            }
            _ => {}
        }
        let Some(v) = args.get(i) else { return usage() };
        i += 1;
        let num = |v: &str| v.parse::<usize>().ok();
        let ok = match a {
            "--experts" => num(v).map(|n| o.experts = n).is_some(),
            "--dim" => num(v).map(|n| o.dim = n).is_some(),
            "--topk" => num(v).map(|n| o.topk = n).is_some(),
            "--tokens" => num(v).map(|n| o.tokens = n).is_some(),
            "--batches" => num(v).map(|n| o.batches = n).is_some(),
            "--budget" => v.parse::<f64>().ok().map(|f| o.budget = f).is_some(),
            "--tier" => {
                o.tier = v.clone();
                true
            }
            "--dtype" => {
                o.dtype = if v == "bf16" { DType::BF16 } else { DType::F32 };
                true
            }
            "--policy" => {
                o.use_policy = v != "none";
                true
            }
            "--csv" => {
                o.csv = Some(v.clone());
                true
            }
            "--dir" => {
                o.dir = Some(v.clone());
                true
            }
            "--compute" => {
                compute = v.clone();
                true
            }
            _ => false,
        };
        if !ok {
            return usage();
        }
    }
    if o.experts < 1
        || o.dim < 1
        || o.topk < 1
        || o.topk > o.experts
        || o.tokens < 1
        || o.batches < 1
        || !(o.budget > 0.0 && o.budget <= 1.0)
        || !["file", "zstd", "host"].contains(&o.tier.as_str())
        || !["cpu", "vulkan"].contains(&compute.as_str())
    {
        return usage();
    }
    match main_with(o, &compute) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("moe_offload: {e}");
            ExitCode::from(1)
        }
    }
}

fn main_with(mut o: Options, compute: &str) -> Result<ExitCode> {
    let rt = Runtime::new()?;
    if compute == "vulkan" {
        match Device::vulkan(&rt) {
            Ok(d) => o.device = Some(d),
            Err(e) => {
                eprintln!("moe_offload: no Vulkan device for --compute vulkan ({e})");
                return Ok(ExitCode::from(77)); // a skip, for the test runner
            }
        }
    }
    let mib = (o.experts * o.dim * o.dim * o.dtype.size()) as f64 / (1 << 20) as f64;
    println!(
        "StrideWeave {} MoE offload (Rust): {} experts of {}x{} {} ({:.0} MiB) on the {} tier, top-{} of {} tokens per \
         batch, primary budget {:.0}% ({} experts) in {} memory, policy {}\n",
        strideweave::version_string(),
        o.experts,
        o.dim,
        o.dim,
        o.dtype,
        mib,
        o.tier,
        o.topk,
        o.tokens,
        o.budget * 100.0,
        budget_tiles(&o),
        if o.device.is_some() { "Vulkan device" } else { "CPU" },
        if o.use_policy { "LRU + prefetch" } else { "none" }
    );
    let picks = route_all(&o);
    if o.train {
        return Ok(if train(&rt, &o, &picks)? { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    let mut csv = match &o.csv {
        Some(path) => {
            let mut f = File::create(path)
                .map_err(|e| strideweave::Error::new(strideweave::ErrorCode::Io, format!("{path}: {e}")))?;
            writeln!(f, "run,batch,latency_ms,wait_ms,hit_rate")
                .map_err(|e| strideweave::Error::new(strideweave::ErrorCode::Io, e.to_string()))?;
            Some(f)
        }
        None => None,
    };
    let r = [
        run(&rt, &o, &picks, Mode::Offload, &mut csv)?,
        run(&rt, &o, &picks, Mode::Resident, &mut csv)?,
        run(&rt, &o, &picks, Mode::Naive, &mut csv)?,
    ];
    drop(csv);
    let tile_mib = (o.dim * o.dim * o.dtype.size()) as f64 / (1 << 20) as f64;
    println!(
        "\n{:<10} {:>12} {:>10} {:>10} {:>14} {:>14} {:>12}",
        "run", "tokens/s", "hit rate", "wait s", "promoted MiB", "evicted MiB", "vs resident"
    );
    for s in &r {
        let total = (s.hits + s.misses) as f64;
        println!(
            "{:<10} {:12.0} {:9.1}% {:10.3} {:14.1} {:14.1} {:11.2}x",
            s.name,
            (o.batches * o.tokens) as f64 / s.seconds,
            if total > 0.0 { 100.0 * s.hits as f64 / total } else { 0.0 },
            s.wait_seconds,
            s.promoted as f64 * tile_mib,
            s.evicted as f64 * tile_mib,
            r[1].seconds / s.seconds
        );
    }
    let reference = r[1].checksum;
    let same = r.iter().all(|s| (s.checksum - reference).abs() <= 1e-6 * reference.abs());
    println!(
        "\noffloaded is {:.2}x faster than naive loading; outputs {} (checksum {})",
        r[2].seconds / r[0].seconds,
        if same { "identical across runs" } else { "DIFFER" },
        format_g(reference, 6)
    );
    Ok(if same { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
