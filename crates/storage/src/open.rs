//! The one way files and directories in a data dir are opened: never blocking on what a broker
//! would not write there.
//!
//! A data dir may be a copy, a restore or a shared volume that holds anything: a FIFO named
//! `00000000000000000000.log` blocks a plain `open(2)` until a writer appears (forever), a
//! socket or a device is not a file of bytes, a symlink may dangle or loop. Every file topicfs
//! opens in a data dir (segment files of every kind, `.swap` leftovers, checkpoints,
//! `meta.properties`, `.lock`, checkpoint temporaries) goes through [`open_regular`], every
//! directory it lists or syncs through [`read_dir`] / [`open_dir`]:
//!
//! 1. `stat(2)` (following symlinks, which never blocks): anything but a regular file (or a
//!    directory) is refused with [`Error::WrongFileType`] without being opened, so a device is
//!    never opened at all; a missing target of a symlink is a dangling symlink, `ELOOP` a loop.
//! 2. `open(2)` with `O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (directories: `O_DIRECTORY`), so that a
//!    name swapped for a FIFO between the `stat` and the `open` still returns at once.
//! 3. `fstat(2)` of what was opened: not a regular file is refused (the descriptor is closed).
//! 4. `O_NONBLOCK` is cleared (it means nothing for a regular file, but nothing depends on it).
//!
//! **Symlinks** are followed: a symlinked segment file or partition directory is served when it
//! leads to a regular file (a directory); a link to a device, FIFO or socket, a dangling link
//! and a loop are refused like the things themselves.

use std::fs::{File, OpenOptions, ReadDir};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use topicfs_source::error::{Error, FileType, Result};

/// What `path` is, following symlinks, without opening it: `stat(2)`, then `lstat(2)` to tell a
/// dangling symlink from a missing name. A missing name is `Err` with `ErrorKind::NotFound`.
pub fn file_type(path: &Path) -> io::Result<FileType> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(type_of(&meta.file_type())),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Ok(FileType::SymlinkLoop),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => Ok(FileType::DanglingSymlink),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

fn type_of(t: &std::fs::FileType) -> FileType {
    if t.is_dir() {
        FileType::Directory
    } else if t.is_fifo() {
        FileType::Fifo
    } else if t.is_socket() {
        FileType::Socket
    } else if t.is_char_device() {
        FileType::CharDevice
    } else if t.is_block_device() {
        FileType::BlockDevice
    } else {
        // After `stat` (which follows links) only regular files are left.
        FileType::Regular
    }
}

fn refused(path: &Path, found: FileType, expected: FileType) -> Error {
    Error::WrongFileType { file: path.to_path_buf(), found, expected }
}

/// Whether `e` says the name does not exist (an `Io` error of kind `NotFound`).
pub fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
}

/// Refuses `path` unless it is (or leads to) a `expected`; a missing name passes (the open
/// that follows reports it, or creates it).
fn check_type(path: &Path, expected: FileType) -> Result<()> {
    match file_type(path) {
        Ok(found) if found == expected => Ok(()),
        Ok(found) => Err(refused(path, found, expected)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, "stat", e)),
    }
}

/// After a failed open: [`Error::WrongFileType`] when the name is (now) not a regular file
/// (a FIFO without a reader answers a non-blocking write open with `ENXIO`, a socket any open
/// with `ENXIO`, a directory a write open with `EISDIR`), else the I/O error of `op`.
fn open_error(path: &Path, op: &'static str, e: io::Error, expected: FileType) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return refused(path, FileType::SymlinkLoop, expected);
    }
    match file_type(path) {
        Ok(found) if found != expected => refused(path, found, expected),
        _ => Error::io(path, op, e),
    }
}

/// Opens the regular file `path` with `options` (read, write, create ... as the caller needs),
/// never blocking and refusing anything else; see the module doc. `op` names the operation in
/// I/O errors ("open", "open index", "create"). A missing file is `Error::Io` of kind
/// `NotFound` ([`is_not_found`]).
pub fn open_regular(path: &Path, options: &mut OpenOptions, op: &'static str) -> Result<File> {
    check_type(path, FileType::Regular)?;
    let file = options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error(path, op, e, FileType::Regular))?;
    let meta = file.metadata().map_err(|e| Error::io(path, "stat", e))?;
    let found = type_of(&meta.file_type());
    if found != FileType::Regular {
        return Err(refused(path, found, FileType::Regular));
    }
    let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| Error::io(path, "fcntl", e.into()))?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| Error::io(path, "fcntl", e.into()))?;
    Ok(file)
}

/// Opens the regular file `path` for reading; see [`open_regular`].
pub fn open_read(path: &Path) -> Result<File> {
    open_regular(path, OpenOptions::new().read(true), "open")
}

/// The whole content of the regular file `path` (checkpoints, `meta.properties`, a
/// `.txnindex`): [`open_read`], then positioned reads up to its length at open (fewer if it
/// shrinks meanwhile).
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let file = open_read(path)?;
    let len = file.metadata().map_err(|e| Error::io(path, "stat", e))?.len();
    let len = usize::try_from(len).map_err(|e| Error::io(path, "read", io::Error::other(e)))?;
    super::scan::read_vec_at(&file, len, 0).map_err(|e| Error::io(path, "read", e))
}

/// [`read_regular`] as UTF-8 text; other bytes are [`Error::Corrupt`] at the first bad byte.
pub fn read_regular_to_string(path: &Path) -> Result<String> {
    String::from_utf8(read_regular(path)?).map_err(|e| {
        let at = e.utf8_error().valid_up_to() as u64;
        Error::corrupt(path, at, "not UTF-8 text")
    })
}

/// Lists the directory `path` (following a symlink to one); anything else is refused with
/// [`Error::WrongFileType`]. `opendir(3)` itself opens with `O_DIRECTORY | O_NONBLOCK`, so a
/// name swapped for a FIFO meanwhile fails at once with `ENOTDIR`.
pub fn read_dir(path: &Path) -> Result<ReadDir> {
    check_type(path, FileType::Directory)?;
    std::fs::read_dir(path).map_err(|e| open_error(path, "readdir", e, FileType::Directory))
}

/// Opens the directory `path` (to fsync it) with `O_DIRECTORY | O_NONBLOCK`; anything else is
/// refused with [`Error::WrongFileType`].
pub fn open_dir(path: &Path) -> Result<File> {
    check_type(path, FileType::Directory)?;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error(path, "open directory", e, FileType::Directory))
}

/// fsyncs the directory `path` (after a create, rename or remove in it).
pub fn sync_dir(path: &Path) -> Result<()> {
    open_dir(path)?.sync_all().map_err(|e| Error::io(path, "fsync", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Every kind of name a data dir can hold in place of a regular file, made under `dir`.
    fn hostile(dir: &Path) -> Vec<(std::path::PathBuf, FileType)> {
        let make = |name: &str| dir.join(name);
        let fifo = make("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o644))
            .unwrap();
        let sock = make("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::mem::forget(_listener);
        let sub = make("dir");
        std::fs::create_dir(&sub).unwrap();
        let zero = make("zero");
        symlink("/dev/zero", &zero).unwrap();
        let dangling = make("dangling");
        symlink(dir.join("nowhere"), &dangling).unwrap();
        let looping = make("loop");
        symlink(&looping, &looping).unwrap();
        vec![
            (fifo, FileType::Fifo),
            (sock, FileType::Socket),
            (sub, FileType::Directory),
            (zero, FileType::CharDevice),
            (dangling, FileType::DanglingSymlink),
            (looping, FileType::SymlinkLoop),
        ]
    }

    #[test]
    fn every_kind_of_non_regular_file_is_refused_by_type_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        for (path, kind) in hostile(tmp.path()) {
            assert_eq!(file_type(&path).unwrap(), kind, "{}", path.display());
            for write in [false, true] {
                let e = open_regular(&path, OpenOptions::new().read(true).write(write), "open")
                    .expect_err(&format!("{} opened", path.display()));
                match &e {
                    Error::WrongFileType { found, expected: FileType::Regular, .. } => {
                        assert_eq!(*found, kind, "{e}")
                    }
                    other => panic!("{}: {other}", path.display()),
                }
                assert_eq!(e.errno(), libc::EIO);
                assert!(e.to_string().contains(&kind.to_string()), "{e}");
            }
            let e = read_regular(&path).unwrap_err();
            assert!(matches!(e, Error::WrongFileType { .. }), "{e}");
            if kind != FileType::Directory {
                let e = read_dir(&path).unwrap_err();
                assert!(matches!(e, Error::WrongFileType { found, .. } if found == kind), "{e}");
                let e = open_dir(&path).unwrap_err();
                assert!(matches!(e, Error::WrongFileType { found, .. } if found == kind), "{e}");
            }
        }
    }

    /// The rule of this module, checked on the source: outside it, nothing in `src/` (the bench
    /// tool and test modules aside) opens, reads or lists a file by itself; the only files
    /// opened otherwise are not in a data dir (`/dev/fuse`, `/proc/self/mountinfo` and the
    /// kernel's other files under `/proc` (`PROC_FS`, src/mount/mountinfo.rs), `/dev/urandom`, a cluster mount's `--command-config` file: the user's own input, read
    /// once before mounting, which may well be a pipe such as `<(…)`, and the daemon's log
    /// file, `--log-file`, opened for appending (src/mount/logging.rs)).
    #[test]
    fn nothing_else_in_the_crate_opens_files_by_itself() {
        // Every crate's sources and the root package's: crates/storage is two levels down.
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut roots = vec![workspace.join("src")];
        for entry in std::fs::read_dir(workspace.join("crates")).unwrap() {
            roots.push(entry.unwrap().path().join("src"));
        }
        let calls = [
            "File::open(",
            "File::create(",
            "fs::read(",
            "fs::read_to_string(",
            "fs::read_dir(",
            ").open(",
            "File::options(",
        ];
        let allowed = [
            "/dev/urandom",
            "DEV_FUSE",
            "/proc/self/mountinfo",
            "PROC_FS",
            "\"read client config\"",
            "read registry setting file",
            "the daemon's log file",
        ];
        let mut stack = roots;
        let mut found = Vec::new();
        let mut files = 0;
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if !path.ends_with("bin") {
                        stack.push(path);
                    }
                    continue;
                }
                if path.ends_with("storage/src/open.rs") || path.extension() != Some("rs".as_ref())
                {
                    continue;
                }
                // A module's tests in a file of their own (`tests.rs`, `*_tests.rs`).
                let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default();
                if name == "tests" || name.ends_with("_tests") {
                    continue;
                }
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
                for (n, line) in code.lines().enumerate() {
                    if calls.iter().any(|c| line.contains(c))
                        && !allowed.iter().any(|a| line.contains(a))
                        && !line.trim_start().starts_with("//")
                    {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(files > 40, "only {files} source files found");
        assert!(found.is_empty(), "open through storage::open instead:\n{}", found.join("\n"));
    }

    #[test]
    fn a_dangling_symlink_is_not_created_through() {
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join(".lock");
        symlink(tmp.path().join("target"), &link).unwrap();
        let e = open_regular(&link, OpenOptions::new().read(true).write(true).create(true), "open")
            .unwrap_err();
        assert!(matches!(e, Error::WrongFileType { found: FileType::DanglingSymlink, .. }), "{e}");
        assert!(!tmp.path().join("target").exists());
    }

    #[test]
    fn regular_files_and_symlinks_to_them_open_blocking_and_missing_ones_are_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"bytes").unwrap();
        let link = tmp.path().join("l");
        symlink(&file, &link).unwrap();
        for path in [&file, &link] {
            let f = open_read(path).unwrap();
            let flags = rustix::fs::fcntl_getfl(&f).unwrap();
            assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK));
            assert_eq!(read_regular(path).unwrap(), b"bytes");
        }
        let e = open_read(&tmp.path().join("missing")).unwrap_err();
        assert!(is_not_found(&e), "{e}");
        let dir_link = tmp.path().join("d");
        symlink(tmp.path(), &dir_link).unwrap();
        assert!(read_dir(&dir_link).is_ok());
        sync_dir(&dir_link).unwrap();
    }
}
