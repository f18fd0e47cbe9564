fn main() -> std::process::ExitCode {
    swe_ark::cli::main()
}
