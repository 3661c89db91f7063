#pragma once
/// Data files checked against the md5 sums they were published with, as torchvision's
/// check_integrity: a damaged, swapped or duplicated file is refused in one line naming it.
///
/// Note [md5 stamps]: hashing CIFAR-10's 180 MB takes about half a second, so a folder's files are
/// hashed once and then trusted while they stay as they were: a stamp records each checked file's
/// md5 with its size, mtime and inode. The inode is there because the official files all have one
/// size and tar gives them one mtime, so `mv a b; mv c a` keeps both; it changes the inode behind
/// the name. A file whose entry no longer matches is hashed again. The stamp sits beside the files
/// (md5_stamp_path), or in the user's cache folder when the data folder is read-only (a shared
/// copy), and is written whole to a temporary file and renamed, so ranks that check the same folder
/// at once never see half a stamp. An edit that restores the size, the mtime and the inode (writing
/// into the file, then `touch -d`) is not noticed: the stamp guards against accidents, not against
/// someone set on deceiving it; deleting the stamp checks everything again.

#include <map>
#include <string>
#include <vector>

namespace tandem::data {

/// Expected md5 sums (32 lower-case hex digits) by file name.
using Md5Sums = std::map<std::string, std::string>;

/// Parses md5sum's format, "HEX  PATH" a line; each file is keyed by its name (PATH's last part).
/// A line of another shape is an error naming `source` and the line.
Md5Sums parse_md5_sums(const std::string& text, const std::string& source);

/// Reads and parses an md5 list written by md5sum (e.g. a subset's); an error names the file.
Md5Sums read_md5_sums(const std::string& path);

/// The md5 of a file's bytes as 32 lower-case hex digits (OpenSSL's EVP MD5).
std::string file_md5(const std::string& path);

/// Where check_md5_sums keeps `folder`'s stamp: `folder`/kMd5StampName when the folder is
/// writable, else ${XDG_CACHE_HOME:-~/.cache}/tandem/md5-stamps/ under a name made from the
/// folder's absolute path.
std::string md5_stamp_path(const std::string& folder);
inline constexpr const char* kMd5StampName = ".tandem-md5-stamp";

struct Md5CheckOptions {
  std::string op = "[md5]";  ///< what the error starts with, e.g. "[cifar10]"
  std::string remedy;        ///< what the error ends with: how to get good files, or skip the check
  std::string stamp;         ///< the stamp file (md5_stamp_path); empty: none, hash every time
};

/// Checks the files `names` of `folder` against `expected`; throws "OP FILE does not match its
/// md5 sum ... REMEDY" for the first that differs (naming the listed file it is a copy of, if
/// any) or that `expected` does not list. Files that the stamp records as they are now are not
/// read; the stamp is rewritten when any was (Note [md5 stamps]); a stamp that cannot be written
/// only costs the next check its time.
void check_md5_sums(const std::string& folder, const std::vector<std::string>& names,
                    const Md5Sums& expected, const Md5CheckOptions& options);

}  // namespace tandem::data
