fn main() {
    let (devs, _) = kiln::parity::devices_for(&[kiln::Backend::Cpu, kiln::Backend::Sim]);
    let t = std::time::Instant::now();
    let out = kiln::parity::run_matrix(&devs, kiln::KernelId::ALL, 42);
    for o in &out {
        println!(
            "{} {} {} w{} {:<22} nrms {:.2e} nmax {:.2e} {} {:?}",
            o.kernel.name(),
            o.dtype.name(),
            o.backend,
            o.wave,
            o.case,
            o.nrms,
            o.nmax,
            o.pass,
            o.failures
        );
    }
    println!("{:?}", t.elapsed());
}
