//! The mount-helper command lines (fstab): `mount.topicfs ... -o OPTIONS` from mount(8) and
//! `topicfs SOURCE MOUNTPOINT -o OPTIONS` from mount.fuse3, turned into `topicfs mount`.

use std::ffi::OsString;
use std::path::Path;

use clap::{ArgAction, CommandFactory};

use crate::error::{Error, Result};
use crate::mount::{FuseOption, escape_option, split_options};

use super::Cli;

/// A mount helper's command line turned into `topicfs mount` arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperArgs {
    /// `mount SOURCE MOUNTPOINT [flags]`, what follows the program name.
    pub args: Vec<OsString>,
    /// mount(8)'s `-f` (fake): check everything, mount nothing.
    pub fake: bool,
}

/// fstab support. topicfs is run as a mount helper in two ways:
/// - as `mount.topicfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS]` by mount(8), for fstab type
///   `topicfs` (with `/sbin/mount.topicfs` a link to the binary);
/// - as `topicfs SOURCE MOUNTPOINT -o OPTIONS` by mount.fuse3, for fstab type `fuse.topicfs`.
///
/// Both become `topicfs mount SOURCE MOUNTPOINT ...`. The options are split at commas, a comma
/// preceded by a backslash belonging to the value (`cleanup.policy=compact\,delete`, see
/// [`split_options`]). FUSE options stay in `-o` ([`FuseOption`]: `ro` also means
/// `--read-only`); an option with a dot in its name (`segment.bytes=1048576`) is a log setting
/// (`--config`), except the Schema Registry client's (`schema.registry.url=URL` is
/// `--schema-registry URL`, `basic.auth.user.info=...` and the other `schema.registry.*`
/// settings `--schema-registry-config`); any other flag of `topicfs mount` is spelled with `_`
/// or `-`: `name=VALUE` for `--name VALUE` (`partitions=3`, `config=cleanup.policy=compact`,
/// `cleaner_backoff_ms=60000`), `name` alone for a flag without a value (`read_only`), except
/// those in [`NOT_FROM_FSTAB`]. Options that are for mount(8) or systemd (`defaults`, `auto`,
/// `noauto`, `user`, `users`, `nouser`, `owner`, `nofail`, `_netdev`, `x-*`, `comment=*`) are
/// dropped. Anything else is refused, unless `-s` (sloppy) was given. `None`: `argv` is an
/// ordinary topicfs command line.
pub fn helper_args(argv: &[OsString]) -> Result<Option<HelperArgs>> {
    let program = argv
        .first()
        .map(|p| Path::new(p).file_name().unwrap_or_default().to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = argv.get(1..).unwrap_or_default();
    let as_mount_helper = program.starts_with("mount.");
    let as_fuse_helper = !as_mount_helper
        && rest.len() >= 2
        && rest.first().is_some_and(|a| {
            let a = a.to_string_lossy();
            !a.starts_with('-')
                && a != "help"
                && Cli::command().find_subcommand(a.as_ref()).is_none()
        });
    if !as_mount_helper && !as_fuse_helper {
        return Ok(None);
    }
    let (mut positional, mut options, mut sloppy, mut fake) =
        (Vec::new(), Vec::new(), false, false);
    let mut words = rest.iter();
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        match text.as_ref() {
            "-o" => {
                let list = words
                    .next()
                    .ok_or_else(|| Error::Usage("-o needs a list of options".into()))?;
                options.extend(split_options(&list.to_string_lossy()));
            }
            "-s" => sloppy = true,
            "-f" => fake = true,
            "-n" | "-v" => {}
            "-t" => {
                words.next();
            }
            _ if text.starts_with("-o") => {
                options.extend(split_options(text.get(2..).unwrap_or_default()));
            }
            _ if text.starts_with('-') && text.len() > 1 => {
                return Err(Error::Usage(format!("mount helper: unknown flag {text:?}")));
            }
            _ => positional.push(word.clone()),
        }
    }
    let [source, mountpoint] = <[OsString; 2]>::try_from(positional).map_err(|p| {
        Error::Usage(format!("mount helper: expected SOURCE MOUNTPOINT, got {p:?}"))
    })?;
    let mut args = vec![OsString::from("mount"), source, mountpoint];
    let (mut fuse_options, mut read_only) = (Vec::new(), false);
    for option in options.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
        let (key, value) = match option.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (option, None),
        };
        let for_mount_8 = matches!(
            (key, value),
            (
                "defaults"
                    | "auto"
                    | "noauto"
                    | "user"
                    | "users"
                    | "nouser"
                    | "owner"
                    | "nofail"
                    | "_netdev",
                None
            ) | ("comment", Some(_))
        ) || key.starts_with("x-");
        if for_mount_8 {
            continue;
        }
        // topicfs's own flags, spelled with `_` (fstab style) or `-`.
        let flag = key.replace('_', "-");
        match (flag.as_str(), value) {
            // `ro` among the FUSE options below means read-only too (`MountArgs::request`).
            ("read-only", None) => read_only = true,
            // The Schema Registry client's settings by their client names.
            ("schema.registry.url", Some(url)) => {
                args.push("--schema-registry".into());
                args.push(url.into());
            }
            _ if value.is_some() && topicfs_registry::RegistryConfig::is_setting(key) => {
                args.push("--schema-registry-config".into());
                args.push(option.into());
            }
            _ if key.contains('.') && value.is_some() => {
                args.push("--config".into());
                args.push(option.into());
            }
            _ => match option.parse::<FuseOption>() {
                Ok(_) => fuse_options.push(escape_option(option)),
                Err(err) => match mount_flag(&flag) {
                    Some(takes_value) => match (takes_value, value) {
                        (true, Some(v)) => {
                            args.push(format!("--{flag}").into());
                            args.push(v.into());
                        }
                        (false, None) => args.push(format!("--{flag}").into()),
                        (true, None) => {
                            return Err(Error::Usage(format!(
                                "mount helper: option {key:?} needs a value ({key}=VALUE)"
                            )));
                        }
                        (false, Some(_)) => {
                            return Err(Error::Usage(format!(
                                "mount helper: option {key:?} takes no value"
                            )));
                        }
                    },
                    None if sloppy => {}
                    // A known option with a bad value: its own message says what is wrong.
                    None if !err.to_string().starts_with("unknown mount option") => {
                        return Err(Error::Usage(format!("mount helper: {err}")));
                    }
                    None => {
                        return Err(Error::Usage(format!(
                            "mount helper: {err}; or a flag of `topicfs mount` spelled \
                             name=value (partitions=3, cleaner_backoff_ms=60000, read_only), or a \
                             log setting (segment.bytes=1048576)"
                        )));
                    }
                },
            },
        }
    }
    if read_only {
        args.push("--read-only".into());
    }
    if !fuse_options.is_empty() {
        args.push("-o".into());
        args.push(fuse_options.join(",").into());
    }
    Ok(Some(HelperArgs { args, fake }))
}

/// Flags of `topicfs mount` that an fstab line cannot give: `foreground` (mount(8) waits for
/// the helper, which would never return) and the hidden internal ones.
pub const NOT_FROM_FSTAB: &[&str] = &["foreground"];

/// Whether `--flag` is a flag of `topicfs mount` an fstab option may give, and if so whether
/// it takes a value (`Some(true)`: `--partitions N`; `Some(false)`: `--read-only`).
pub fn mount_flag(flag: &str) -> Option<bool> {
    let command = Cli::command();
    let mount = command.find_subcommand("mount")?;
    let arg = mount.get_arguments().find(|a| a.get_long() == Some(flag))?;
    if arg.is_hide_set() || NOT_FROM_FSTAB.contains(&flag) {
        return None;
    }
    match arg.get_action() {
        ArgAction::Set | ArgAction::Append => Some(true),
        ArgAction::SetTrue => Some(false),
        _ => None,
    }
}
