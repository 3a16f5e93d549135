//! The `genesisctl` binary: hands the process arguments and standard streams
//! to [`genesisctl::run`] and exits with its code. Nothing else belongs here.

fn main() {
    let code = genesisctl::run(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
