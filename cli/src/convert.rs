//! `kiln convert --mlx <dir> --model <file.gguf>`: a Llama GGUF written as an MLX model
//! directory (`config.json`, `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`),
//! which `kiln generate` and `kiln bench --decode` then read.

use kiln::quant::GgufFile;
use kiln_benches::decode::export_mlx;

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF file (Llama architecture).
    #[arg(long)]
    model: std::path::PathBuf,
    /// The directory to write (created if absent).
    #[arg(long)]
    mlx: std::path::PathBuf,
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let mut file = GgufFile::open(&a.model)?;
    export_mlx(&mut file, &a.mlx)?;
    eprintln!(
        "# wrote {} as an MLX directory at {}",
        a.model.display(),
        a.mlx.display()
    );
    Ok(())
}
