"""Every git call drover makes, through the git CLI; git is started in run.py alone."""
from __future__ import annotations

from drover.git.branches import (Refs, all_refs, branch_exists, branch_heads, branch_refs, current_branch, detect_base,
                                 head_of, heads_of, local_ref, no_base, reads_as_ref, require_base,
                                 shadowing_refs, valid_branch_name)
from drover.git.bundles import advance_branch, bundle_create, bundle_heads, clone_bundle, fetch_bundle
from drover.git.attributes import changed_by_shared, configured_attributes, shared_attributes
from drover.git.history import (Commit, Recent, blobs_at, blobs_on_disk, changed_paths, commits_beyond, gitlinks_at,
                                commits_paths, compare, count_commits, cut_merge_bases, merge_bases, merged_by, modified_files,
                                moved_only_under, recent_commits, shown_as_binary)
from drover.git.merges import (MergeConflict, conflict_markers, conflicts_merged, head_markers, merge, merge_base_into, merge_in_progress,
                               unmerged_files)
from drover.git.plumbing import commit_file, set_index_entry
from drover.git.run import git, housekeeping, rev_parse, user_name
from drover.git.worktrees import (add_detached_worktree, checkout_branch, dirty_entries, dirty_paths, ensure_worktree,
                                  hidden_from_status, ignores,
                                  own_git_dir, private_dir, registered_worktrees, remove_worktree, differing_on_disk,
                                  differing_in_index)

__all__ = [
    "Commit", "MergeConflict", "Recent", "Refs", "add_detached_worktree", "advance_branch", "all_refs",
    "blobs_at", "blobs_on_disk", "branch_exists", "branch_heads", "branch_refs", "bundle_create", "bundle_heads",
    "changed_by_shared", "changed_paths",
    "checkout_branch", "clone_bundle", "conflict_markers", "conflicts_merged", "commit_file", "commits_beyond", "commits_paths", "compare", "configured_attributes", "count_commits", "cut_merge_bases",
    "current_branch", "detect_base", "differing_in_index", "differing_on_disk", "dirty_entries", "dirty_paths", "ensure_worktree", "fetch_bundle", "git", "gitlinks_at",
    "head_markers", "head_of", "heads_of", "hidden_from_status", "housekeeping", "ignores", "local_ref", "merge",
    "merge_base_into", "merge_bases", "merged_by", "merge_in_progress", "no_base",
    "modified_files",
    "moved_only_under", "own_git_dir",
    "private_dir", "reads_as_ref", "recent_commits", "registered_worktrees", "remove_worktree", "require_base", "rev_parse",
    "set_index_entry", "shadowing_refs", "shared_attributes", "shown_as_binary", "unmerged_files", "user_name", "valid_branch_name",
]
