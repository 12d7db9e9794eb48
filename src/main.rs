use std::process::ExitCode;

fn main() -> ExitCode {
    gpu_policy::cli::main()
}
