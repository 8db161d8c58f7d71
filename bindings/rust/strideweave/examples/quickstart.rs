use strideweave::{Carrier, DType, LruPolicy, Runtime, Tensor, TileSelection, TiledEvictable};

fn main() -> strideweave::Result<()> {
    let rt = Runtime::new()?;

    // Tensors, ops and autograd. Values go in and out first mode fastest:
    // element (i, j) of a (2, 3) tensor is value i + 2 * j.
    let a = Tensor::from_slice(&rt, &[2, 3], &[1f32, 4., 2., 5., 3., 6.])?.requires_grad_()?;
    let loss = a.matmul(&a.transpose(0, 1)?)?.mul_scalar(0.5)?.relu()?.sum()?;
    loss.backward(None, false)?;
    println!("{} {:?}", loss.item()?, a.grad()?.unwrap().to_vec::<f32>()?);

    // A TiledEvictable: 8 experts of 64x64 f32, one per tile, in a scratch
    // file (the secondary tier); at most 2 of them in CPU memory (the primary).
    // Experts are the last mode: grid (1, 1, E), tile (K, N, 1), the geometry
    // expert_matmul and expert_ffn take.
    let (experts, dim) = (8, 64);
    let values: Vec<f32> = (0..experts * dim * dim).map(|i| (i % 7) as f32 - 3.0).collect();
    let secondary = Carrier::file(&rt, DType::F32, values.len(), &Default::default())?;
    secondary.write(0, &values)?; // tile after tile, each first mode fastest
    let lru = LruPolicy::new(2)?;
    let primary = Carrier::cpu(&rt, DType::F32, 0)?;
    let table = TiledEvictable::new(&primary, &secondary, &[1, 1, experts as i64], &[dim as i64, dim as i64, 1], &lru)?;
    let full = table.full_tensor()?; // (64, 64, 8), logical

    let chosen = TileSelection::new([&[0][..], &[0], &[5, 2]])?; // experts 5 and 2, in that order
    let pending = table.project(&full, &chosen, None)?; // promotes and gathers in the background
    let x = Tensor::from_slice(&rt, &[dim as i64, 4], &vec![1f32; dim * 4])?;
    let compact = pending.wait()?; // (64, 64, 2)
    let w = compact.permute(&[2, 0, 1])?; // (2, 64, 64), a free view
    let y = w.matmul(&x)?; // (2, 64, 4)
    println!("{:?} {:?} {} {:?}", w.shape()?, y.shape()?, table.primary_tiles()?.len(), lru.stats()?);
    table.dispose()?; // frees both tiers; the scratch file goes with it
    Ok(())
}
