//! The FUSE session: the fuser configuration of a mount request, the `mount(2)` of a
//! `fuse.topicfs` file system (or fuser's own mount), and how it is unmounted again.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};

use super::detach::detach_lazily;
use super::{FuseOption, MountRequest};
use crate::error::{Error, Result};
use crate::fuse::FuseAdapter;

/// The mount's subtype unless `-o subtype=` names another: its type is `fuse.topicfs`.
const SUBTYPE: &str = "topicfs";
/// The FUSE device; without it nothing can be mounted.
pub(super) const DEV_FUSE: &str = "/dev/fuse";

/// Mounts `mountpoint` and starts the FUSE session on it.
///
/// As root the mount is made here with `mount(2)`, so that it gets the file system type
/// `fuse.<subtype>` (`fuse.topicfs` unless `-o subtype=` says otherwise) as `/proc/mounts`,
/// `findmnt -t` and fstab expect: fuser's own `mount(2)` call always says `fuse`. Without the
/// privilege (`EPERM`), and with `auto_unmount` (which needs fusermount3 to watch the daemon),
/// fuser mounts it, through fusermount3 when not root.
pub(super) fn start_session(
    adapter: FuseAdapter,
    mountpoint: &Path,
    config: &Config,
) -> Result<(Session<FuseAdapter>, Unmounter), String> {
    let auto_unmount = config.mount_options.contains(&MountOption::AutoUnmount);
    if nix::unistd::geteuid().is_root() && !auto_unmount {
        match mount_directly(mountpoint, &config.mount_options, config.acl) {
            Ok(device) => {
                let unmounter = Unmounter::Direct(mountpoint.to_path_buf());
                return match Session::from_fd(adapter, device, config.acl, config.clone()) {
                    Ok(session) => Ok((session, unmounter)),
                    Err(err) => {
                        // Mounted, but no session serves it: take it away again.
                        detach_lazily(mountpoint);
                        Err(format!("FUSE handshake failed: {err}"))
                    }
                };
            }
            Err(nix::errno::Errno::EPERM) => {
                log::debug!("mount(2) of {} refused; mounting through fuser", mountpoint.display());
            }
            Err(err) => return Err(format!("mount(2): {err}")),
        }
    }
    let mut session = Session::new(adapter, mountpoint, config).map_err(|e| e.to_string())?;
    let unmounter = Unmounter::Fuser(Arc::new(std::sync::Mutex::new(session.unmount_callable())));
    Ok((session, unmounter))
}

/// `mount(2)` of a new FUSE connection on `mountpoint` with `options`, as libfuse and fuser
/// make it (the options a FUSE file system takes: `fd`, `rootmode`, `user_id`, `group_id`,
/// `default_permissions`, `allow_other`; `nodev` and `nosuid` unless `dev`/`suid` are given),
/// but with the type `fuse.<subtype>` and the source `fsname`. Returns the `/dev/fuse`
/// descriptor the session reads.
fn mount_directly(
    mountpoint: &Path,
    options: &[MountOption],
    acl: SessionACL,
) -> Result<std::os::fd::OwnedFd, nix::errno::Errno> {
    use nix::mount::MsFlags;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::fs::PermissionsExt;

    let errno =
        |e: std::io::Error| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    let root_mode = fs::metadata(mountpoint).map_err(errno)?.permissions().mode();
    let device = fs::OpenOptions::new().read(true).write(true).open(DEV_FUSE).map_err(errno)?;
    let mut data = format!(
        "fd={},rootmode={root_mode:o},user_id={},group_id={}",
        device.as_raw_fd(),
        nix::unistd::getuid(),
        nix::unistd::getgid()
    );
    let (mut source, mut subtype) = (DEV_FUSE.to_string(), SUBTYPE.to_string());
    let mut flags = MsFlags::empty();
    let (mut dev, mut suid) = (false, false);
    for option in options {
        match option {
            MountOption::FSName(name) => source.clone_from(name),
            MountOption::Subtype(name) => subtype.clone_from(name),
            MountOption::DefaultPermissions => data.push_str(",default_permissions"),
            MountOption::CUSTOM(custom) => {
                data.push(',');
                data.push_str(custom);
            }
            MountOption::Dev => dev = true,
            MountOption::Suid => suid = true,
            MountOption::NoDev => flags |= MsFlags::MS_NODEV,
            MountOption::NoSuid => flags |= MsFlags::MS_NOSUID,
            MountOption::RO => flags |= MsFlags::MS_RDONLY,
            MountOption::NoExec => flags |= MsFlags::MS_NOEXEC,
            MountOption::NoAtime => flags |= MsFlags::MS_NOATIME,
            MountOption::Sync => flags |= MsFlags::MS_SYNCHRONOUS,
            MountOption::DirSync => flags |= MsFlags::MS_DIRSYNC,
            MountOption::RW | MountOption::Exec | MountOption::Atime | MountOption::Async => {}
            MountOption::AutoUnmount => {}
        }
    }
    if !dev {
        flags |= MsFlags::MS_NODEV;
    }
    if !suid {
        flags |= MsFlags::MS_NOSUID;
    }
    if acl != SessionACL::Owner {
        // The session checks allow_root itself (fuser's `SessionACL`); the kernel only knows
        // allow_other.
        data.push_str(",allow_other");
    }
    let fstype = format!("fuse.{subtype}");
    nix::mount::mount(
        Some(source.as_str()),
        mountpoint,
        Some(fstype.as_str()),
        flags,
        Some(data.as_str()),
    )?;
    Ok(OwnedFd::from(device))
}

/// How the daemon unmounts its mount at a termination signal: `umount(2)` of a mount it made
/// itself, or fuser's unmounter for one fuser made.
#[derive(Clone)]
pub(super) enum Unmounter {
    Direct(PathBuf),
    Fuser(Arc<std::sync::Mutex<SessionUnmounter>>),
}

impl Unmounter {
    pub(super) fn unmount(&mut self) -> std::io::Result<()> {
        match self {
            Unmounter::Direct(mountpoint) => nix::mount::umount(mountpoint.as_path())
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32)),
            Unmounter::Fuser(unmounter) => crate::sync::lock(unmounter).unmount(),
        }
    }
}

/// The fuser session configuration for `request`.
pub(super) fn session_config(request: &MountRequest, data_dir: &Path) -> Result<Config> {
    let mut fsname = data_dir.display().to_string();
    let mut subtype = SUBTYPE.to_string();
    let mut acl = SessionACL::Owner;
    let mut auto_unmount = false;
    let mut flags = Vec::new();
    for option in &request.fuse_options {
        match option {
            FuseOption::AllowOther => acl = SessionACL::All,
            FuseOption::AllowRoot => {
                if acl != SessionACL::All {
                    acl = SessionACL::RootAndOwner;
                }
            }
            FuseOption::DefaultPermissions
            | FuseOption::ReadOnly
            | FuseOption::ReadWrite
            | FuseOption::NoPassthrough
            | FuseOption::ShowInternal
            | FuseOption::AllowNonLogDir
            | FuseOption::NonEmpty
            | FuseOption::AutoOffsetReset(_)
            | FuseOption::AutoCommit
            | FuseOption::Uid(_)
            | FuseOption::Gid(_)
            | FuseOption::Umask(_)
            | FuseOption::FileMode(_)
            | FuseOption::DirMode(_)
            | FuseOption::MemoryBudget(_)
            | FuseOption::BackgroundThreads(_)
            | FuseOption::CacheDir(_)
            | FuseOption::Schemas(_)
            | FuseOption::SchemasTopic(_)
            | FuseOption::SchemaRegistry(_)
            | FuseOption::JsonPayload(_)
            | FuseOption::Index { .. }
            | FuseOption::CacheSize(_)
            | FuseOption::LogFile(_) => {}
            FuseOption::AutoUnmount => auto_unmount = true,
            FuseOption::FsName(name) => fsname.clone_from(name),
            FuseOption::Subtype(name) => subtype.clone_from(name),
            FuseOption::Flag(flag) => flags.push(kernel_flag(flag)),
        }
    }
    if auto_unmount && acl == SessionACL::Owner {
        return Err(Error::Mount(
            "auto_unmount needs allow_other or allow_root (a fusermount3 requirement)".into(),
        ));
    }
    if !nix::unistd::geteuid().is_root() {
        // fusermount3 takes the name inside its comma-separated `-o` list, where a comma (one
        // between several log dirs) is written `\,` (libfuse's escape); as root the name is
        // mount(2)'s source as it is.
        fsname = fsname.replace(',', "\\,");
    }
    let mut mount_options = vec![
        MountOption::FSName(fsname),
        MountOption::Subtype(subtype),
        // The kernel checks the mode bits shown (see `Access`).
        MountOption::DefaultPermissions,
        if request.read_only { MountOption::RO } else { MountOption::RW },
    ];
    if auto_unmount {
        mount_options.push(MountOption::AutoUnmount);
    }
    mount_options.extend(flags.into_iter().flatten());
    let mut config = Config::default();
    config.mount_options = mount_options;
    config.acl = acl;
    config.n_threads = Some(request.threads.max(1));
    Ok(config)
}

fn kernel_flag(flag: &str) -> Option<MountOption> {
    Some(match flag {
        "nodev" => MountOption::NoDev,
        "nosuid" => MountOption::NoSuid,
        "noexec" => MountOption::NoExec,
        "noatime" => MountOption::NoAtime,
        "dev" => MountOption::Dev,
        "suid" => MountOption::Suid,
        "exec" => MountOption::Exec,
        "atime" => MountOption::Atime,
        "sync" => MountOption::Sync,
        "async" => MountOption::Async,
        "dirsync" => MountOption::DirSync,
        _ => return None,
    })
}
