//! Where the `memcached` and `nutcracker` binaries are: the path in an
//! environment variable, else the first on `PATH`, else the usual system
//! directories. A binary that is not found panics with instructions on
//! how to install it.

use std::path::PathBuf;

/// What to do when memcached is not found.
pub const MEMCACHED_INSTALL: &str = "memcached was not found. Install it (Debian/Ubuntu: \
`sudo apt-get update && sudo apt-get install -y memcached`, macOS: `brew install memcached`), \
or point MEMCACHED_BIN at the binary. `scripts/test` installs it for you.";

/// What to do when nutcracker is not found.
pub const NUTCRACKER_INSTALL: &str = "nutcracker (twemproxy) was not found. Install it \
(Debian/Ubuntu: `sudo apt-get update && sudo apt-get install -y nutcracker`), or point \
NUTCRACKER_BIN at the binary. `scripts/test` installs it for you.";

const SYSTEM_DIRS: [&str; 3] = ["/usr/bin", "/usr/local/bin", "/usr/sbin"];

/// The memcached binary: `MEMCACHED_BIN`, else `memcached` on `PATH` or
/// in /usr/bin, /usr/local/bin, /usr/sbin.
///
/// # Panics
///
/// With [`MEMCACHED_INSTALL`] when there is none, or when `MEMCACHED_BIN`
/// is not a file.
pub fn memcached() -> PathBuf {
    find("memcached", "MEMCACHED_BIN", MEMCACHED_INSTALL)
}

/// The nutcracker binary: `NUTCRACKER_BIN`, else `nutcracker` on `PATH`
/// or in /usr/bin, /usr/local/bin, /usr/sbin.
///
/// # Panics
///
/// With [`NUTCRACKER_INSTALL`] when there is none, or when
/// `NUTCRACKER_BIN` is not a file.
pub fn nutcracker() -> PathBuf {
    find("nutcracker", "NUTCRACKER_BIN", NUTCRACKER_INSTALL)
}

fn find(name: &str, variable: &str, install: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{variable}={} is not a file. {install}",
            path.display()
        );
        return path;
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(SYSTEM_DIRS.map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{install}"))
}

/// What to do when redis-cli is not found.
pub const REDIS_CLI_INSTALL: &str = "redis-cli was not found. Install it (Debian/Ubuntu: \
`sudo apt-get update && sudo apt-get install -y redis-tools`, macOS: `brew install redis`), \
or point REDIS_CLI_BIN at the binary. `.ci/run` installs it for you.";

/// The redis-cli binary: `REDIS_CLI_BIN`, else `redis-cli` on `PATH` or
/// in /usr/bin, /usr/local/bin, /usr/sbin.
///
/// # Panics
///
/// With [`REDIS_CLI_INSTALL`] when there is none.
pub fn redis_cli() -> PathBuf {
    find("redis-cli", "REDIS_CLI_BIN", REDIS_CLI_INSTALL)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_binary_fails_with_the_instructions() {
        let failure = std::panic::catch_unwind(|| {
            super::find(
                "no-such-binary-anywhere",
                "NO_SUCH_BINARY_VARIABLE",
                "install it",
            )
        })
        .expect_err("nothing is found");
        assert_eq!(failure.downcast_ref::<String>().unwrap(), "install it");
    }
}
